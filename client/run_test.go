package client

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakecluster"
	"github.com/ployz/ployz/sdk/volume"
)

// runSnap is three observed Machines serving run_container; web has an
// old Deployment d1 on m1 (exited) and the current d2 on m2 and m3.
func runSnap(mounts ...rpc.MountSpec) deploy.Snapshot {
	spec := &rpc.ContainerSpec{Namespace: "shop", Service: "web", Image: "app:2", Mounts: mounts}
	web := func(id, m, dep, state string, created int64) rpc.ContainerObservation {
		return rpc.ContainerObservation{ID: id, Name: "shop-web-" + id, MachineID: "id-" + m, Namespace: "shop", Service: "web",
			Deployment: dep, State: state, CreatedAt: created, Spec: spec, Labels: map[string]string{rpc.LabelKind: rpc.KindService}}
	}
	caps := []string{rpc.CapRunContainer}
	return deploy.Snapshot{Machines: []deploy.MachineState{
		{ID: "id-m1", Name: "m1", Observed: true, Capabilities: caps, Containers: []rpc.ContainerObservation{web("c1", "m1", "d1", "exited", 100)}},
		{ID: "id-m2", Name: "m2", Observed: true, Capabilities: caps, Containers: []rpc.ContainerObservation{web("c2", "m2", "d2", "running", 200)}},
		{ID: "id-m3", Name: "m3", Observed: true, Capabilities: caps, Containers: []rpc.ContainerObservation{web("c3", "m3", "d2", "running", 300),
			{ID: "r1", Name: "shop-web-run-1", MachineID: "id-m3", Namespace: "shop", Service: "web", Deployment: "d3", State: "running", CreatedAt: 400,
				Spec: spec, Labels: map[string]string{rpc.LabelKind: rpc.KindRun}}}},
	}}
}

// TestChooseRun: a run copies a Container of the current deployment (the
// Serving Pointer's, else the newest; never a one-off run), running
// first, and runs where it is unless --machine says otherwise.
func TestChooseRun(t *testing.T) {
	snap := runSnap()
	for _, c := range []struct {
		current, machine, from, target string
	}{
		{"d2", "", "c2", "m2"},
		{"", "", "c2", "m2"},   // no pointer: the newest replica's deployment, d2 (not the run's d3)
		{"d1", "", "c1", "m1"}, // the pointer's, even exited
		{"d2", "m3", "c3", "m3"},
		{"d2", "id-m1", "c2", "m1"}, // no current Container there: it copies one elsewhere
	} {
		ch, err := chooseRun(snap, "shop", "web", c.current, c.machine)
		if err != nil || ch.from.ID != c.from || ch.target.Name != c.target {
			t.Errorf("current %q --machine %q: from %s on %s, %v; want %s on %s", c.current, c.machine, ch.from.ID, ch.target.Name, err, c.from, c.target)
		}
	}
	_, err := chooseRun(snap, "shop", "api", "", "")
	var nd *NotDeployedError
	if !errors.As(err, &nd) || !strings.HasPrefix(err.Error(), "service api: not deployed in shop") {
		t.Errorf("unknown service: %v", err)
	}
	partial := runSnap()
	partial.Missing = []deploy.Unobserved{{MachineID: "id-m4", Name: "m4", Reason: "timeout"}}
	if _, err := chooseRun(partial, "shop", "api", "", ""); err == nil || !strings.Contains(err.Error(), "not observed: m4") {
		t.Errorf("unknown service with a Machine unobserved: %v", err)
	}
	if _, err := chooseRun(snap, "shop", "web", "d2", "m9"); err == nil || !strings.Contains(err.Error(), "--machine") || !strings.Contains(err.Error(), "m9") {
		t.Errorf("--machine m9: %v", err)
	}
	unobserved := runSnap()
	unobserved.Machines[2].Observed = false
	unobserved.Missing = []deploy.Unobserved{{MachineID: "id-m3", Name: "m3", Reason: "deadline exceeded"}}
	if _, err := chooseRun(unobserved, "shop", "web", "d2", "m3"); err == nil || err.Error() != "--machine m3: not observed: deadline exceeded" {
		t.Errorf("--machine unobserved: %v", err)
	}
}

// TestChooseRunAdmission: a Machine that is drained, lacks run_container,
// or lacks the Service's data is refused for --machine, naming why, and
// skipped for the default choice.
func TestChooseRunAdmission(t *testing.T) {
	snap := runSnap()
	snap.Machines[1].Labels = map[string]string{rpc.MachineLabelDrained: "2026-12-01"}
	if ch, err := chooseRun(snap, "shop", "web", "d2", ""); err != nil || ch.target.Name != "m3" {
		t.Errorf("m2 drained: %s, %v; want m3", ch.target.Name, err)
	}
	if _, err := chooseRun(snap, "shop", "web", "d2", "m2"); err == nil || !strings.Contains(err.Error(), "--machine m2: ") || !strings.Contains(err.Error(), "machine m2 is drained") {
		t.Errorf("--machine drained: %v", err)
	}
	snap.Machines[2].Capabilities = nil
	if _, err := chooseRun(snap, "shop", "web", "d2", ""); err == nil || !strings.Contains(err.Error(), "no Machine holding it admits a one-off run") {
		t.Errorf("neither admits: %v", err)
	}
	if _, err := chooseRun(snap, "shop", "web", "d2", "m3"); err == nil || !strings.Contains(err.Error(), rpc.CapRunContainer) {
		t.Errorf("--machine without run_container: %v", err)
	}

	snap = runSnap(rpc.MountSpec{Type: "volume", Source: "shop_data", Target: "/data"})
	snap.Machines[1].Volumes = []string{"shop_data"}
	if _, err := chooseRun(snap, "shop", "web", "d2", "m3"); err == nil ||
		err.Error() != "--machine m3: it does not hold volume shop_data of service web (held on m2): a one-off runs where the Service's data is" {
		t.Errorf("--machine without the Docker volume: %v", err)
	}
	if ch, err := chooseRun(snap, "shop", "web", "d2", ""); err != nil || ch.target.Name != "m2" {
		t.Errorf("default with the volume on m2: %s, %v", ch.target.Name, err)
	}

	snap = runSnap(rpc.MountSpec{Type: "bind", Source: filepath.Join(volume.MountRoot, "db"), Target: "/var/lib/db"})
	snap.Machines[2].Writers = []string{"db"}
	if _, err := chooseRun(snap, "shop", "web", "d2", "m2"); err == nil || !strings.Contains(err.Error(), "Provisioned Volume db of service web is not the Writer (held on m3)") {
		t.Errorf("--machine without the Writer: %v", err)
	}
	if ch, err := chooseRun(snap, "shop", "web", "d2", ""); err != nil || ch.target.Name != "m3" || ch.from.ID != "c3" {
		t.Errorf("default with the Writer on m3: %s from %s, %v", ch.target.Name, ch.from.ID, err)
	}
}

// TestRunSpec: a run keeps what the Service's Containers run with and
// drops what makes one a replica.
func TestRunSpec(t *testing.T) {
	base := rpc.ContainerSpec{Namespace: "shop", Service: "web", ServiceID: "s1", DeploymentID: "d2", SpecHash: "s1:0123456789abcdef", Image: "app:2",
		Entrypoint: []string{"/app"}, Command: []string{"serve"}, Env: map[string]string{"DB": "x"}, Ports: []rpc.PortSpec{{ContainerPort: 80, HostPort: 8080}},
		Mounts: []rpc.MountSpec{{Type: "volume", Source: "shop_data", Target: "/data"}}, Files: []rpc.FileSpec{{Target: "/etc/app.conf", Digest: "sha256:1", Kind: "file"}},
		Healthcheck: &rpc.Healthcheck{Test: []string{"CMD", "/app", "health"}}, Readiness: "healthcheck", Restart: "always",
		Ingress: []rpc.IngressRoute{{Hostname: "shop.test", ContainerPort: 80}}, Constraints: []rpc.Constraint{{Label: "zone", Op: "==", Value: "a"}},
		Networks: []string{"external:pay", "shop"}, Aliases: map[string][]string{"external:pay": {"shop-api"}}}
	argv := []string{"/app", "migrate", "--yes"}
	s := RunSpec(base, argv)
	argv[1] = "changed"
	if s.Kind != rpc.KindRun || s.SpecHash != "" || !slices.Equal(s.Entrypoint, []string{"/app"}) || !slices.Equal(s.Command, []string{"migrate", "--yes"}) {
		t.Errorf("process: %+v", s)
	}
	if s.Ports != nil || s.Healthcheck != nil || s.Ingress != nil || s.Aliases != nil || s.Readiness != "none" || s.Restart != "no" {
		t.Errorf("replica fields kept: %+v", s)
	}
	if s.Env["DB"] != "x" || len(s.Mounts) != 1 || len(s.Files) != 1 || s.DeploymentID != "d2" || s.ServiceID != "s1" || len(s.Constraints) != 1 || len(s.Networks) != 2 {
		t.Errorf("the Service's own fields lost: %+v", s)
	}
	if own := RunSpec(base, nil); !slices.Equal(own.Entrypoint, base.Entrypoint) || !slices.Equal(own.Command, base.Command) {
		t.Errorf("no command: %v %v", own.Entrypoint, own.Command)
	}
}

// runOnFake plans and runs req on the fake Cluster.
func runOnFake(t *testing.T, s *Session, req RunRequest, o RunIO) (*RunPlan, RunResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := s.PlanRun(ctx, req)
	if err != nil {
		return nil, RunResult{}, err
	}
	res, err := s.Run(ctx, p, req, o)
	return p, res, err
}

// TestRunOnTheFakeCluster: a run is planned from a deployed Service,
// sent to one of its Machines and relayed: output split, stdin, a
// forwarded signal, the exit code; removed unless kept; a detached kept
// run is listed by ps but is no replica, a redeploy leaves it alone and
// the Service's removal takes it.
func TestRunOnTheFakeCluster(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	req := RunRequest{Namespace: "shop-production", Service: "web", Command: []string{"/app", "exit", "3"}}
	var out, errw strings.Builder
	p, res, err := runOnFake(t, s, req, RunIO{Stdout: &out, Stderr: &errw})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 3 || !res.Removed || out.String() != "/app exit 3\n" || errw.String() != "in "+p.Name+"\n" {
		t.Fatalf("run: %+v, %v, stdout %q, stderr %q", res, err, out.String(), errw.String())
	}
	m := fc.Machine(p.Machine)
	fc.Lock()
	sent := m.Runs[0]
	fc.Unlock()
	if sent.Spec.Kind != rpc.KindRun || sent.Spec.Image != "app:1" || sent.Stdin || sent.TTY || sent.Detach || !strings.HasPrefix(p.Name, "shop-production-web-run-") {
		t.Errorf("sent %+v as %s", sent, p.Name)
	}

	out.Reset()
	req.Command, req.Stdin = []string{"cat"}, true
	if _, res, err = runOnFake(t, s, req, RunIO{Stdin: strings.NewReader("hello\n"), Stdout: &out, Stderr: &errw}); err != nil || *res.ExitCode != 0 || out.String() != "cat\nhello\n" {
		t.Fatalf("stdin: %+v, %v, %q", res, err, out.String())
	}

	ctl := make(chan rpc.RunControl, 1)
	ctl <- rpc.RunControl{Signal: "SIGINT"}
	errw.Reset()
	req.Command, req.Stdin = []string{"sleep", "wait"}, false
	if _, res, err = runOnFake(t, s, req, RunIO{Stdout: &out, Stderr: &errw, Control: ctl}); err != nil || *res.ExitCode != 130 || errw.String() != "got SIGINT\n" {
		t.Fatalf("signal: %+v, %v, %q", res, err, errw.String())
	}

	req = RunRequest{Namespace: "shop-production", Service: "web", Command: []string{"/app", "report"}, Detach: true, Keep: true, Machine: "m2"}
	_, res, err = runOnFake(t, s, req, RunIO{Stdout: &out, Stderr: &errw})
	if err != nil || res.ExitCode != nil || !res.Detached || res.ID == "" || res.Machine != "m2" {
		t.Fatalf("detached: %+v, %v", res, err)
	}
	ctx := context.Background()
	_, replicas, err := s.ServiceContainers(ctx, "shop-production", "web")
	if err != nil || len(replicas) != 2 {
		t.Errorf("replicas with a run beside them: %d, %v", len(replicas), err)
	}
	rows, _, err := s.Containers(ctx, "shop-production", "web")
	if err != nil || len(rows) != 3 || !slices.ContainsFunc(rows, func(r ContainerRow) bool { return r.ID == res.ID && r.Labels[rpc.LabelKind] == rpc.KindRun }) {
		t.Errorf("ps: %+v, %v", rows, err)
	}
	if svcs, _, err := s.Services(ctx, "shop-production"); err != nil || len(svcs) != 1 || svcs[0].Total != 2 {
		t.Errorf("service ls counts: %+v, %v", svcs, err)
	}
	if again := deployShop(t, s); again.Plan.Changes() != 0 {
		t.Errorf("a redeploy beside a kept run changes %d rows: %+v", again.Plan.Changes(), again.Plan.Rows)
	}
	if _, err := s.Deploy(ctx, DeployRequest{Compose: []byte("name: shop\nservices:\n  api:\n    image: app:1\n"), File: "compose.yaml"}, Hooks{}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(fc.ContainerIDs(), res.ID) {
		t.Errorf("the kept run of web outlived web's removal: %v", fc.ContainerIDs())
	}
}

// TestRunRefusals: nothing is run for a Service that is not deployed, on
// an unknown Machine, or where no Machine serves run_container.
func TestRunRefusals(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	var out strings.Builder
	if _, _, err := runOnFake(t, s, RunRequest{Namespace: "shop-production", Service: "api"}, RunIO{Stdout: &out, Stderr: &out}); err == nil ||
		!strings.HasPrefix(err.Error(), "service api: not deployed in shop-production") {
		t.Errorf("unknown service: %v", err)
	}
	if _, _, err := runOnFake(t, s, RunRequest{Namespace: "shop-production", Service: "web", Machine: "m9"}, RunIO{Stdout: &out, Stderr: &out}); err == nil ||
		!strings.Contains(err.Error(), "--machine") {
		t.Errorf("unknown Machine: %v", err)
	}
	for _, name := range []string{"m1", "m2"} {
		fc.Lock()
		n := len(fc.Machine(name).Runs)
		fc.Unlock()
		if n != 0 {
			t.Errorf("%s served %d runs after refusals", name, n)
		}
	}

	old := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdRunContainer}}, "m1")
	os := New(old.Store, old.Entry, "lab")
	deployShop(t, os)
	if _, _, err := runOnFake(t, os, RunRequest{Namespace: "shop-production", Service: "web"}, RunIO{Stdout: &out, Stderr: &out}); err == nil ||
		!strings.Contains(err.Error(), rpc.CapRunContainer) || !strings.Contains(err.Error(), "ployz machine upgrade") {
		t.Errorf("no Machine serves run_container: %v", err)
	}
}

// TestDetachedLogsCommand: the logs command names the project and a
// non-default environment only when the run's flags did.
func TestDetachedLogsCommand(t *testing.T) {
	res := RunResult{Container: "shop-web-run-1"}
	for _, tc := range []struct{ project, env, want string }{
		{"", deploy.DefaultEnvironment, "ployz logs web --container shop-web-run-1 -f"},
		{"shop", "staging", "ployz logs web -p shop --env staging --container shop-web-run-1 -f"},
	} {
		if got := Detached(res, "web", tc.project, tc.env).Logs; got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.project, tc.env, got, tc.want)
		}
	}
}
