package containers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/dockertest"
)

func TestContainerLifecycleReadinessNone(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("web", map[string]string{"MESSAGE": "secret-value"})
	spec.Ports = []rpc.PortSpec{{ContainerPort: 8080}}
	spec.Mounts = []rpc.MountSpec{{Type: "volume", Source: to.Namespace + "-data", Target: "/data"}}
	spec.Labels = map[string]string{"team": "a"}
	id := to.createStart(t, "web", spec)

	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 10})
	if res.Outcome != outcomeReady {
		t.Fatalf("wait_ready: %+v", res)
	}
	list := featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace})
	if len(list.Containers) != 1 {
		t.Fatalf("list: %d containers, want 1", len(list.Containers))
	}
	ob := list.Containers[0]
	if !ob.Ready || ob.State != "running" || ob.IP == "" || ob.Service != "web" || ob.ServiceID != "sid-web" ||
		ob.Deployment != "dep1" || ob.SpecHash != "hash1" || ob.MachineID != "m-test" || ob.Labels["team"] != "a" {
		t.Fatalf("observation: %+v", ob)
	}
	if ob.Spec == nil || ob.Spec.Env["MESSAGE"] != redacted || ob.Spec.Readiness != readinessNone {
		t.Fatalf("spec label: %+v (env values must be redacted)", ob.Spec)
	}
	// export_container gives the values back, for a move to recreate it.
	ex := featuretest.Must[rpc.ContainerExport](t, featuretest.Typed(to.exportContainer), rpc.ContainerRef{ID: id})
	if ex.ID != id || ex.Spec.Env["MESSAGE"] != "secret-value" || len(ex.Spec.Env) != 1 || ex.Spec.Labels["team"] != "a" || ex.Spec.SpecHash != "hash1" {
		t.Fatalf("export: %+v", ex)
	}
	if !slices.Contains(list.Volumes, to.Namespace+"-data") || list.Labels["zone"] != "a" {
		t.Fatalf("list volumes %v labels %v", list.Volumes, list.Labels)
	}
	in, err := to.Cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if string(in.HostConfig.RestartPolicy.Name) != "unless-stopped" || !slices.Equal(in.HostConfig.DNS, []string{to.facts.DNS}) {
		t.Fatalf("restart %q dns %v", in.HostConfig.RestartPolicy.Name, in.HostConfig.DNS)
	}
	// The published row carries names only.
	body := ServiceRow(ob, in)
	if !body.Ready || body.Namespace != to.Namespace || !slices.Contains(body.EnvNames, "MESSAGE") {
		t.Fatalf("row: %+v", body)
	}

	st := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.stopContainer), rpc.StopContainerRequest{ID: id, GracePeriodSeconds: 1})
	if st.State != "exited" || st.Ready {
		t.Fatalf("after stop: %+v", st)
	}
	featuretest.Must[map[string]string](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: id, Force: true})
	list = featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace})
	if len(list.Containers) != 0 {
		t.Fatalf("after remove: %+v", list.Containers)
	}
	if _, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.startContainer), rpc.ContainerRef{ID: id}); featuretest.Code(err) != rpc.CodeNotFound {
		t.Fatalf("start of a removed container: %v, want not_found", err)
	}
}

func TestReadinessHealthcheck(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("hc", map[string]string{"READY_DELAY": "2s"})
	spec.Healthcheck = &rpc.Healthcheck{Test: []string{"CMD", "/testapp", "healthcheck"}, IntervalMS: 300, TimeoutMS: 2000, Retries: 20}
	start := time.Now()
	id := to.createStart(t, "hc", spec)
	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 20})
	if res.Outcome != outcomeReady {
		t.Fatalf("wait_ready: %+v", res)
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("ready after %s, before READY_DELAY", el)
	}
	ob := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.stopContainer), rpc.StopContainerRequest{ID: id, GracePeriodSeconds: 1})
	if ob.Ready {
		t.Fatal("a stopped Container is ready")
	}
}

func TestReadinessNotify(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("nt", map[string]string{"READY_DELAY": "3s"})
	spec.Readiness = readinessNotify
	id := to.createStart(t, "nt", spec)
	in, _ := to.Cli.ContainerInspect(context.Background(), id)
	var dir string
	for _, m := range in.Mounts {
		if m.Destination == notifyMountTarget {
			dir = m.Source
		}
	}
	if dir == "" || filepath.Dir(dir) != to.cfg.NotifyDir {
		t.Fatalf("notify mount %q not under %s", dir, to.cfg.NotifyDir)
	}
	// A process outside the Container (this test) cannot make it ready.
	if err := sendNotify(t, &notifySock{containerSock: containerSock{dir: dir}}, "READY=1"); err != nil {
		t.Fatalf("send from outside: %v", err)
	}
	if !eventually(func() bool { return to.ready.refused.Load() == 1 }) {
		t.Fatalf("READY=1 from outside: refused %d, want 1", to.ready.refused.Load())
	}

	// Not ready before its delay.
	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 1})
	if res.Outcome != outcomeTimeout {
		t.Fatalf("wait_ready before READY_DELAY: %+v, want timeout", res)
	}
	res = featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 15})
	if res.Outcome != outcomeReady {
		t.Fatalf("wait_ready: %+v", res)
	}

	// A restarted daemon re-binds the socket and keeps the verdict of the same run.
	again := New(to.cfg)
	again.restore(context.Background())
	ob, err := again.observeID(context.Background(), id)
	if err != nil || !ob.Ready {
		t.Fatalf("after daemon restart: ready=%v err=%v", ob.Ready, err)
	}

	// Stop withdraws readiness; the next run must notify again.
	featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(again.stopContainer), rpc.StopContainerRequest{ID: id, GracePeriodSeconds: 1})
	featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(again.startContainer), rpc.ContainerRef{ID: id})
	if ob, _ := again.observeID(context.Background(), id); ob.Ready {
		t.Fatal("ready at once after a restart, before the new run notified")
	}
	res = featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(again.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 15})
	if res.Outcome != outcomeReady {
		t.Fatalf("wait_ready after restart: %+v", res)
	}

	// Remove closes the socket and removes its directory.
	featuretest.Must[map[string]string](t, featuretest.Typed(again.removeContainer), rpc.RemoveContainerRequest{ID: id, Force: true})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("notify dir %s after remove: %v", dir, err)
	}
}

// TestReadinessNotifySenders: only a process inside the Container marks
// it ready. On the host, an unprivileged user cannot reach the socket at
// all, and root (this test) reaches it but is refused as outside the
// Container; a short-lived process inside, waiting on BARRIER=1, counts.
func TestReadinessNotifySenders(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("ns", map[string]string{"READY_DELAY": "1h"}) // its main process never notifies here
	spec.Readiness = readinessNotify
	// As an older daemon left it: searchable by everyone. The daemon
	// must make it root-only.
	if err := os.Chmod(to.cfg.NotifyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	id := to.createStart(t, "ns", spec)
	if fi, err := os.Stat(to.cfg.NotifyDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("notify dir %v %v, want 0700", fi.Mode(), err)
	}
	to.ready.mu.Lock()
	sock := filepath.Join(to.ready.socks[id].dir, notifySocketName)
	to.ready.mu.Unlock()

	if os.Geteuid() == 0 {
		appDir, err := os.MkdirTemp("", "pzapp")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(appDir) })
		os.Chmod(appDir, 0o755) // nobody runs the binary from it
		bin, err := dockertest.BuildTestApp(appDir)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "notify")
		cmd.Env = []string{"NOTIFY_SOCKET=" + sock}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "permission denied") {
			t.Fatalf("nobody on the host reached the notify socket: %v: %s", err, out)
		}
	}

	// Root outside the Container reaches the socket, names this Container
	// by it, and is refused and counted.
	if err := sendNotify(t, &notifySock{containerSock: containerSock{dir: filepath.Dir(sock)}}, "READY=1"); err != nil {
		t.Fatalf("send from outside: %v", err)
	}
	if !eventually(func() bool { return to.ready.refused.Load() == 1 }) {
		t.Fatalf("READY=1 from outside: refused %d, want 1", to.ready.refused.Load())
	}
	if ob, _ := to.observeID(context.Background(), id); ob.Ready {
		t.Fatal("READY=1 from outside the Container marked it ready")
	}

	// A process inside that sends and exits, after the barrier: accepted.
	if code, out := execIn(t, to.Cli, id, "/testapp", "notify"); code != 0 {
		t.Fatalf("testapp notify in the Container: exit %d: %s", code, out)
	}
	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 5})
	if res.Outcome != outcomeReady {
		t.Fatalf("wait_ready after READY=1 from inside: %+v", res)
	}
	if got := to.ready.refused.Load(); got != 1 {
		t.Fatalf("refused = %d after a genuine sender, want 1", got)
	}
}

func TestWaitReadyCrash(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	env := map[string]string{"CRASH_ON_START": "1", "EXIT_CODE": "3"}
	spec := to.Spec("crash", env)
	spec.Restart = "no"
	id := to.createStart(t, "crash", spec)
	res := waitReadyPastSettle(t, to, id)
	if res.Outcome != outcomeExited || res.ExitCode != 3 || !strings.Contains(strings.Join(res.LogTail, "\n"), "crashing on start") {
		t.Fatalf("crash: %+v", res)
	}

	// With the default restart policy the crash shows as a restart loop.
	id = to.createStart(t, "loop", to.Spec("loop", env))
	res = waitReadyPastSettle(t, to, id)
	if res.Outcome != outcomeRestarting || res.ExitCode != 3 || len(res.LogTail) == 0 {
		t.Fatalf("restart loop: %+v", res)
	}
}

// waitReadyPastSettle is wait_ready for a readiness-none Container that
// crashes on start. Ready means "still running noneSettle after Docker
// started it"; on a starved host the process can take longer than that
// to reach its crash, and then the first answer is a (true) ready. The
// crash must show on the next call, with its exit code and output.
func waitReadyPastSettle(t *testing.T, to *testOps, id string) rpc.WaitReadyResult {
	t.Helper()
	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 10})
	if res.Outcome == outcomeReady {
		t.Logf("ran past the %s settle before it crashed (a loaded host); asking again", noneSettle)
		time.Sleep(2 * time.Second)
		res = featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 10})
	}
	return res
}

func TestWaitReadyHook(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("hook", map[string]string{"EXIT_AFTER": "1500ms", "EXIT_CODE": "0"})
	spec.Kind = "hook"
	id := to.createStart(t, "hook", spec)
	res := featuretest.Must[rpc.WaitReadyResult](t, featuretest.Typed(to.waitReady), rpc.WaitReadyRequest{ID: id, TimeoutSeconds: 10})
	if res.Outcome != outcomeExited || res.ExitCode != 0 {
		t.Fatalf("hook: %+v, want exited 0", res)
	}
	in, err := to.Cli.ContainerInspect(context.Background(), id)
	if err != nil || in.HostConfig.RestartPolicy.Name != "no" {
		t.Fatalf("hook restart policy %q (%v), want no", in.HostConfig.RestartPolicy.Name, err)
	}
}

func TestAdmissionRefusals(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	vol := to.Namespace + "-refused"
	withVol := func(s rpc.ContainerSpec) rpc.ContainerSpec {
		s.Mounts = []rpc.MountSpec{{Type: "volume", Source: vol, Target: "/data"}}
		return s
	}
	s := withVol(to.Spec("a", nil))
	s.Constraints = []rpc.Constraint{{Label: "zone", Op: "==", Value: "b"}}
	_, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("a"), Spec: s})
	if featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "constraint") != "zone==b" {
		t.Fatalf("constraint: %v", err)
	}
	s = withVol(to.Spec("b", nil))
	s.Image = "ployz-no-such-image:" + to.Namespace
	_, err = featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("b"), Spec: s})
	if featuretest.Code(err) != rpc.CodeNotFound || featuretest.Detail(err, "image") != s.Image {
		t.Fatalf("missing image: %v", err)
	}
	s = withVol(to.Spec("r", nil))
	s.Roles = []string{"db"}
	to.facts.Labels = map[string]string{rpc.MachineLabelRolePrefix + "ssd": "true"}
	_, err = featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("r"), Spec: s})
	if featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "role") != "db" {
		t.Fatalf("role: %v", err)
	}
	to.facts.Labels = map[string]string{rpc.MachineLabelAccepts: "ingress,builds"}
	_, err = featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("i"), Spec: withVol(to.Spec("i", nil))})
	if featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "accepts") != "ingress,builds" {
		t.Fatalf("accepts: %v", err)
	}
	to.facts.Labels = map[string]string{"zone": "a", rpc.MachineLabelDrained: "2026-12-01T00:00:00Z"}
	_, err = featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("d"), Spec: withVol(to.Spec("d", nil))})
	if featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "drained") != "2026-12-01T00:00:00Z" {
		t.Fatalf("drained: %v", err)
	}
	to.facts.Phase = machine.Joining
	_, err = featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("c"), Spec: withVol(to.Spec("c", nil))})
	if featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "phase") != "joining" {
		t.Fatalf("phase: %v", err)
	}
	list := featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace})
	if len(list.Containers) != 0 || slices.Contains(list.Volumes, vol) {
		t.Fatalf("a refusal created something: %+v volumes %v", list.Containers, list.Volumes)
	}
	entries, _ := os.ReadDir(to.cfg.NotifyDir)
	if len(entries) != 0 {
		t.Fatalf("a refusal left notify dirs: %v", entries)
	}
}

func TestCreateRefusesBadFields(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	cases := []struct {
		field string
		edit  func(*rpc.CreateContainerRequest)
	}{
		{"name", func(r *rpc.CreateContainerRequest) { r.Name = "bad name" }},
		{"spec.image", func(r *rpc.CreateContainerRequest) { r.Spec.Image = "" }},
		{"spec.ports[0].container_port", func(r *rpc.CreateContainerRequest) { r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 0}} }},
		{"spec.ports[1].protocol", func(r *rpc.CreateContainerRequest) {
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80}, {ContainerPort: 81, Protocol: "sctp"}}
		}},
		{"spec.ports[0].socket_activation", func(r *rpc.CreateContainerRequest) {
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80, SocketActivation: true}}
		}},
		{"spec.ports[0].socket_activation", func(r *rpc.CreateContainerRequest) {
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 53, HostPort: 5353, Protocol: "udp", SocketActivation: true}}
		}},
		{"spec.ports[1].socket_activation", func(r *rpc.CreateContainerRequest) {
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80, HostPort: 18080, SocketActivation: true}, {ContainerPort: 81, HostPort: 18081, SocketActivation: true}}
		}},
		{"spec.ports[0].socket_activation", func(r *rpc.CreateContainerRequest) {
			r.Spec.Kind = rpc.KindHook
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 80, HostPort: 18080, SocketActivation: true}}
		}},
		{"spec.mounts[0].target", func(r *rpc.CreateContainerRequest) { r.Spec.Mounts = []rpc.MountSpec{{Type: "tmpfs", Target: "rel"}} }},
		{"spec.mounts[0].type", func(r *rpc.CreateContainerRequest) { r.Spec.Mounts = []rpc.MountSpec{{Type: "nfs", Target: "/x"}} }},
		{"spec.readiness", func(r *rpc.CreateContainerRequest) { r.Spec.Readiness = "eventually" }},
		{"spec.restart", func(r *rpc.CreateContainerRequest) { r.Spec.Restart = "sometimes" }},
		{"spec.healthcheck.test", func(r *rpc.CreateContainerRequest) { r.Spec.Healthcheck = &rpc.Healthcheck{Test: []string{"curl"}} }},
		{"spec.healthcheck", func(r *rpc.CreateContainerRequest) { r.Spec.Readiness = readinessHealthcheck }},
		{"spec.constraints[0].op", func(r *rpc.CreateContainerRequest) { r.Spec.Constraints = []rpc.Constraint{{Label: "a", Op: "~"}} }},
		{"spec.labels", func(r *rpc.CreateContainerRequest) { r.Spec.Labels = map[string]string{rpc.LabelService: "x"} }},
		{"spec.memory_bytes", func(r *rpc.CreateContainerRequest) { r.Spec.MemoryBytes = -1 }},
		{"spec.networks[1]", func(r *rpc.CreateContainerRequest) {
			r.Spec.Networks = []string{rpc.ExternalNetworkPrefix + "payments", "other-ns/back"}
		}},
		{"spec.networks[0]", func(r *rpc.CreateContainerRequest) { r.Spec.Networks = []string{r.Spec.Namespace + "/"} }},
		{`spec.aliases["x"]`, func(r *rpc.CreateContainerRequest) { r.Spec.Aliases = map[string][]string{"x": {"api"}} }},
	}
	for _, c := range cases {
		req := rpc.CreateContainerRequest{Name: to.Name("bad"), Spec: to.Spec("bad", nil)}
		c.edit(&req)
		_, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), req)
		if featuretest.Code(err) != rpc.CodeInvalidArgument || featuretest.Detail(err, "field") != c.field {
			t.Errorf("%s: got %v (field %v)", c.field, err, featuretest.Detail(err, "field"))
		}
	}
	if _, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), json.RawMessage(`{"spec":{"ports":"x"}}`)); featuretest.Code(err) != rpc.CodeInvalidArgument {
		t.Errorf("malformed payload: %v", err)
	}
	list := featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace})
	if len(list.Containers) != 0 {
		t.Fatalf("a refused spec created %d containers", len(list.Containers))
	}
}

func TestContainerLogs(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("logs", map[string]string{"READY_DELAY": "100ms"})
	id := to.createStart(t, "logs", spec)
	deadline := time.Now().Add(10 * time.Second)
	// wait_ready's log tail reads Docker directly (the Log Store routes
	// replaced container_logs for everyone else).
	var lines []rpc.LogLine
	for time.Now().Before(deadline) {
		var err error
		if lines, err = to.logs(context.Background(), id, 100, 0); err != nil {
			t.Fatal(err)
		}
		if len(lines) >= 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[0].Text, "testapp: listening") ||
		lines[0].Stream != "stdout" || lines[0].Time == 0 || lines[1].Text != "testapp: ready" {
		t.Fatalf("logs: %+v", lines)
	}
	if tail := to.logTail(context.Background(), id); len(tail) == 0 || tail[len(tail)-1] != "testapp: ready" {
		t.Fatalf("log tail: %q", tail)
	}
}
