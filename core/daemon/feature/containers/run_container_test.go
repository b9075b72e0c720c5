package containers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
)

// serveRuns serves run_container of o on a unix socket, as ployzd does,
// and returns a client of it: the stream's frames, its end and the
// client's disappearance behave as over Machine RPC.
func serveRuns(t *testing.T, o *Ops) *rpc.Client {
	t.Helper()
	srv := rpc.NewServer(rpc.Options{Local: func() (string, string) { return "m-test", "test" }})
	srv.HandleStream(rpc.BindStream(rpc.RunContainer, o.runContainer))
	return featuretest.ServeServer(t, srv)
}

// runReq is a run of testapp's one-shot mode with args in a Service
// whose environment has MESSAGE=v1.
func (to *testOps) runReq(name string, args ...string) rpc.RunContainerRequest {
	spec := to.Spec("job", map[string]string{"MESSAGE": "v1"})
	spec.Kind, spec.SpecHash = rpc.KindRun, ""
	spec.Entrypoint, spec.Command = []string{"/testapp"}, args
	return rpc.RunContainerRequest{CreateContainerRequest: rpc.CreateContainerRequest{Name: to.Namespace + "-" + name, Spec: spec}}
}

// runOutcome is what a run's stream said.
type runOutcome struct {
	started        *rpc.RunStarted
	exited         *rpc.RunExited
	stdout, stderr strings.Builder
}

// readRun reads s to its end; each stdout chunk is also sent on lines
// (when set) as it arrives.
func readRun(s *rpc.ClientStream, lines chan<- string) (*runOutcome, error) {
	out := &runOutcome{}
	for {
		f, err := s.Recv()
		if errors.Is(err, io.EOF) || f.Done {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(f.Data) > 0 {
			var o rpc.ExecOutput
			json.Unmarshal(f.Event, &o) // no event: stdout
			if o.Stream == "stderr" {
				out.stderr.Write(f.Data)
			} else {
				out.stdout.Write(f.Data)
				if lines != nil {
					lines <- string(f.Data)
				}
			}
			continue
		}
		var e rpc.RunEvent
		if err := json.Unmarshal(f.Event, &e); err != nil {
			return out, err
		}
		if e.Started != nil {
			out.started = e.Started
		}
		if e.Exited != nil {
			out.exited = e.Exited
		}
	}
}

// openRun opens a run_container stream for req.
func openRun(t *testing.T, c *rpc.Client, req rpc.RunContainerRequest) (*rpc.ClientStream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	s, err := c.OpenStream(ctx, rpc.Target{}, rpc.CmdRunContainer, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	return s, func() { s.Close(); cancel() }
}

// openSleeping opens a run of testapp's --sleep and returns once it
// sleeps; res answers what the stream said once it ends.
func openSleeping(t *testing.T, c *rpc.Client, req rpc.RunContainerRequest) (*rpc.ClientStream, <-chan *runOutcome, context.CancelFunc) {
	t.Helper()
	s, done := openRun(t, c, req)
	lines := make(chan string, 64)
	res := make(chan *runOutcome, 1)
	go func() { out, _ := readRun(s, lines); res <- out }()
	waitLine(t, lines, "sleeping")
	return s, res, done
}

// waitLine reads lines until one contains want.
func waitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q from the run within 30s", want)
		}
	}
}

func (to *testOps) gone(t *testing.T, id string) bool {
	t.Helper()
	_, err := to.Cli.ContainerInspect(context.Background(), id)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return cerrdefs.IsNotFound(err)
}

// TestRunContainerAttached: a run relays its process's stdout and
// stderr apart, in the Service's environment, answers its exit code and
// is removed afterwards; with stdin attached, what the client sends
// reaches the process and the client's EOF ends its input.
func TestRunContainerAttached(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)

	s, done := openRun(t, c, to.runReq("run-a", "--exit-code", "3", "--say", "hello"))
	defer done()
	out, err := readRun(s, nil)
	if err != nil || out.started == nil || out.exited == nil {
		t.Fatalf("run: %v, %+v", err, out)
	}
	if out.stdout.String() != "testapp run: MESSAGE=v1\nhello\n" || !strings.Contains(out.stderr.String(), "testapp run: exit 3") {
		t.Errorf("stdout %q, stderr %q", out.stdout.String(), out.stderr.String())
	}
	if out.exited.ExitCode != 3 || !out.exited.Removed || out.exited.Note != "" {
		t.Errorf("exited: %+v", out.exited)
	}
	if out.started.Name != to.Namespace+"-run-a" || out.started.MachineID != "m-test" || !to.gone(t, out.started.ID) {
		t.Errorf("started %+v; removed afterwards: %v", out.started, to.gone(t, out.started.ID))
	}

	req := to.runReq("run-b", "--exit-code", "0", "--cat")
	req.Stdin = true
	s, done = openRun(t, c, req)
	defer done()
	if err := s.Send(rpc.StreamFrame{Data: []byte("from the client\n")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(rpc.StreamFrame{EOF: true}); err != nil {
		t.Fatal(err)
	}
	out, err = readRun(s, nil)
	if err != nil || out.exited == nil || out.exited.ExitCode != 0 || !strings.HasSuffix(out.stdout.String(), "from the client\n") {
		t.Fatalf("--cat: %v, stdout %q, %+v", err, out.stdout.String(), out.exited)
	}
}

// TestRunContainerTTY: with a terminal the process sees one, and its
// output arrives as one stream.
func TestRunContainerTTY(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	req := to.runReq("run-t", "--exit-code", "4")
	req.TTY, req.Stdin, req.Width, req.Height = true, true, 100, 30
	s, done := openRun(t, c, req)
	defer done()
	out, err := readRun(s, nil)
	if err != nil || out.exited == nil || out.exited.ExitCode != 4 {
		t.Fatalf("tty run: %v, %+v", err, out.exited)
	}
	if !strings.Contains(out.stdout.String(), "tty=true") || out.stderr.Len() != 0 {
		t.Errorf("stdout %q, stderr %q", out.stdout.String(), out.stderr.String())
	}
}

// TestRunContainerSignalAndListing: while a run is running,
// list_containers leaves it out unless asked for one-offs, and then
// shows it never ready; a signal the client forwards reaches the
// process, whose exit code the run answers.
func TestRunContainerSignalAndListing(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	s, res, done := openSleeping(t, c, to.runReq("run-s", "--exit-code", "0", "--sleep", "60s"))
	defer done()

	plain := featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace})
	if len(plain.Containers) != 0 {
		t.Errorf("list_containers without one_offs lists %+v", plain.Containers)
	}
	all := featuretest.Must[rpc.ContainerList](t, featuretest.Typed(to.listContainers), rpc.ListContainersRequest{Namespace: to.Namespace, OneOffs: true})
	if len(all.Containers) != 1 {
		t.Fatalf("list_containers with one_offs: %+v", all.Containers)
	}
	co := all.Containers[0]
	if co.State != "running" || co.Ready || co.Labels[rpc.LabelKind] != rpc.KindRun || co.Labels[rpc.LabelRunAttached] != "1" || co.Labels[rpc.LabelRunKeep] != "" {
		t.Errorf("the running run: %+v", co)
	}

	ev, _ := json.Marshal(rpc.RunControl{Signal: "SIGINT"})
	if err := s.Send(rpc.StreamFrame{Event: ev}); err != nil {
		t.Fatal(err)
	}
	out := <-res
	if out.exited == nil || out.exited.ExitCode != 130 || !strings.Contains(out.stdout.String(), "got interrupt") {
		t.Fatalf("after SIGINT: %+v, stdout %q", out.exited, out.stdout.String())
	}
}

// TestRunContainerClientGone: a run whose client goes away is stopped
// and removed; with keep it is stopped and kept.
func TestRunContainerClientGone(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	for _, keep := range []bool{false, true} {
		req := to.runReq("run-g", "--exit-code", "0", "--sleep", "120s")
		if keep {
			req.Name += "-kept"
		}
		req.Keep = keep
		_, res, done := openSleeping(t, c, req)
		done() // the client goes away
		<-res
		id := to.containerByName(t, req.Name)
		deadline := time.Now().Add(40 * time.Second)
		for {
			in, err := to.Cli.ContainerInspect(context.Background(), id)
			if !keep && cerrdefs.IsNotFound(err) {
				break
			}
			if keep && err == nil && in.State.Status == "exited" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("keep %v: the run of a gone client is still %v %v", keep, in.State, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// containerByName is the id of the Container named name.
func (to *testOps) containerByName(t *testing.T, name string) string {
	t.Helper()
	in, err := to.Cli.ContainerInspect(context.Background(), name)
	if err != nil {
		t.Fatalf("container %s: %v", name, err)
	}
	return in.ID
}

// TestRunContainerDetached: a detached run answers its Container at once
// and runs on; once it ended the reaper removes it, unless it is kept.
func TestRunContainerDetached(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	ids := map[bool]string{}
	for _, keep := range []bool{false, true} {
		req := to.runReq("run-d", "--exit-code", "2")
		if keep {
			req.Name += "-kept"
		}
		req.Detach, req.Keep = true, keep
		s, done := openRun(t, c, req)
		out, err := readRun(s, nil)
		done()
		if err != nil || out.started == nil || out.exited != nil || out.stdout.Len() != 0 {
			t.Fatalf("detached: %v, %+v", err, out)
		}
		ids[keep] = out.started.ID
		waitC, errC := to.Cli.ContainerWait(context.Background(), out.started.ID, container.WaitConditionNotRunning)
		select {
		case w := <-waitC:
			if w.StatusCode != 2 {
				t.Fatalf("detached run exited %d, want 2", w.StatusCode)
			}
		case err := <-errC:
			t.Fatal(err)
		}
		in, _ := to.Cli.ContainerInspect(context.Background(), out.started.ID)
		if in.Config.Labels[rpc.LabelRunAttached] != "" || (in.Config.Labels[rpc.LabelRunKeep] == "1") != keep || in.HostConfig.RestartPolicy.Name != "no" {
			t.Errorf("keep %v: labels %v, restart %v", keep, in.Config.Labels, in.HostConfig.RestartPolicy)
		}
	}
	if err := to.reapRuns(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if !to.gone(t, ids[false]) || to.gone(t, ids[true]) {
		t.Fatalf("after a reap: ended run removed %v (want true), kept run removed %v (want false)", to.gone(t, ids[false]), to.gone(t, ids[true]))
	}
}

// TestRunContainerWaitsForTheLogStore: an ended run is removed only once
// the Log Store holds its last line, asked with that line's time from
// Docker's log; a Log Store that cannot be asked is said in the note.
func TestRunContainerWaitsForTheLogStore(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	var calls atomic.Int32
	var since atomic.Int64
	to.logsHeld = func(_ context.Context, _ string, s int64) (bool, error) {
		since.Store(s)
		return calls.Add(1) > 3, nil
	}
	before := time.Now().UnixNano()
	s, done := openRun(t, c, to.runReq("run-l", "--exit-code", "0", "--say", "last words"))
	defer done()
	out, err := readRun(s, nil)
	if err != nil || out.exited == nil || !out.exited.Removed || out.exited.Note != "" {
		t.Fatalf("run: %v, %+v", err, out.exited)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("the Log Store was asked %d times, want 4 (removed at the first yes)", n)
	}
	if s := since.Load(); s < before || s > time.Now().UnixNano() {
		t.Errorf("asked since %d, not the time of the run's last line (after %d)", s, before)
	}

	to.logsHeld = func(context.Context, string, int64) (bool, error) {
		return false, rpc.Errorf(rpc.CodeUnavailable, "no Log Store is serving")
	}
	s, done = openRun(t, c, to.runReq("run-m", "--exit-code", "0"))
	defer done()
	out, err = readRun(s, nil)
	if err != nil || out.exited == nil || !out.exited.Removed || !strings.Contains(out.exited.Note, "no Log Store is serving") {
		t.Fatalf("without a Log Store: %v, %+v", err, out.exited)
	}
}

// TestRunContainerRefusals: what a one-off cannot be is refused naming
// the field, before anything is created; create_container creates no
// run; admission is create_container's own.
func TestRunContainerRefusals(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	spec := to.runReq("x", "--exit-code", "0").Spec
	if _, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Namespace + "-x", Spec: spec}); featuretest.Detail(err, "field") != "spec.kind" {
		t.Errorf("create_container of kind run: %v", err)
	}
	for field, change := range map[string]func(*rpc.RunContainerRequest){
		"spec.restart": func(r *rpc.RunContainerRequest) { r.Spec.Restart = "always" },
		"spec.ports[0].host_port": func(r *rpc.RunContainerRequest) {
			r.Spec.Ports = []rpc.PortSpec{{ContainerPort: 8080, HostPort: 18080}}
		},
		"spec.ingress": func(r *rpc.RunContainerRequest) {
			r.Spec.Ingress = []rpc.IngressRoute{{Hostname: "a.test", ContainerPort: 8080}}
		},
		"spec.readiness": func(r *rpc.RunContainerRequest) { r.Spec.Readiness = "notify" },
		"tty":            func(r *rpc.RunContainerRequest) { r.Detach, r.TTY = true, true },
		"spec.kind":      func(r *rpc.RunContainerRequest) { r.Spec.Kind = rpc.KindHook },
		"spec.constraints[0]": func(r *rpc.RunContainerRequest) {
			r.Spec.Constraints = []rpc.Constraint{{Label: "zone", Op: "==", Value: "b"}}
		},
		"spec.mounts[0].target": func(r *rpc.RunContainerRequest) { r.Spec.Mounts = []rpc.MountSpec{{Type: "tmpfs", Target: "tmp"}} },
	} {
		req := to.runReq("refused", "--exit-code", "0")
		change(&req)
		s, done := openRun(t, c, req)
		_, err := readRun(s, nil)
		done()
		if featuretest.Detail(err, "field") != field {
			t.Errorf("%s: %v", field, err)
		}
	}
	if list, _ := to.Cli.ContainerList(context.Background(), container.ListOptions{All: true}); len(list) > 0 {
		for _, c := range list {
			if c.Labels["ployz.namespace"] == to.Namespace {
				t.Errorf("a refused run left Container %v", c.Names)
			}
		}
	}
}

// TestReapVerdict: what the reaper does with a run no handler relays.
func TestReapVerdict(t *testing.T) {
	now := time.Now()
	old, recent := now.Add(-2*runOrphanAfter).Unix(), now.Unix()
	attached := map[string]string{rpc.LabelRunAttached: "1"}
	kept := map[string]string{rpc.LabelRunKeep: "1"}
	for _, c := range []struct {
		state   string
		labels  map[string]string
		created int64
		want    reapAction
	}{
		{"running", attached, recent, reapStop},
		{"running", nil, old, reapLeave}, // detached: runs as long as it needs
		{"running", kept, old, reapLeave},
		{"created", nil, recent, reapLeave}, // about to start
		{"created", kept, old, reapRemove},
		{"exited", nil, recent, reapWhenLogged},
		{"dead", attached, old, reapWhenLogged},
		{"exited", kept, old, reapLeave},
	} {
		if got := reapVerdict(c.state, c.labels, c.created, now); got != c.want {
			t.Errorf("%s %v created %ds ago: %d, want %d", c.state, c.labels, now.Unix()-c.created, got, c.want)
		}
	}
}

// TestReapStopsARunNobodyRelays: the reaper of the process relaying an
// attached run leaves it running; a restarted daemon's reaper (which
// relays nothing) stops it, since its terminal is gone.
func TestReapStopsARunNobodyRelays(t *testing.T) {
	to := newTestOps(t)
	c := serveRuns(t, to.Ops)
	_, res, done := openSleeping(t, c, to.runReq("run-o", "--exit-code", "0", "--sleep", "120s"))
	defer done()
	if err := to.reapRuns(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	in, err := to.Cli.ContainerInspect(context.Background(), to.Namespace+"-run-o")
	if err != nil || !in.State.Running {
		t.Fatalf("the relaying daemon's reaper touched its own run: %v %+v", err, in.State)
	}
	restarted := New(to.cfg)
	if err := restarted.reapRuns(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-res:
		if out.exited == nil || out.exited.ExitCode != 143 || !strings.Contains(out.stdout.String(), "got terminated") {
			t.Fatalf("the orphaned run: %+v, stdout %q", out.exited, out.stdout.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned run was not stopped within 30s")
	}
}
