package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// TestTaskJob: volume_task's kinds map to their Docker step, keyed by
// Container or image, bounded by the kind's timeout; only the Container
// steps hold the mount grant; a missing or bad kind request names its
// field.
func TestTaskJob(t *testing.T) {
	o := &containerOps{}
	base := rpc.VolumeTaskRequest{Volume: "db", Gen: 3, Expect: "writer"}
	with := func(f func(*rpc.VolumeTaskRequest)) rpc.VolumeTaskRequest { r := base; f(&r); return r }
	for _, c := range []struct {
		name    string
		req     rpc.VolumeTaskRequest
		subject string
		timeout time.Duration
		grant   bool
		field   string
	}{
		{"stop", with(func(r *rpc.VolumeTaskRequest) {
			r.Kind, r.Stop = rpc.TaskStop, &rpc.StopContainerRequest{ID: "c1", GracePeriodSeconds: 20}
		}), "c1", 20*time.Second + stopMargin, true, ""},
		{"stop with Docker's grace", with(func(r *rpc.VolumeTaskRequest) { r.Kind, r.Stop = rpc.TaskStop, &rpc.StopContainerRequest{ID: "c1"} }),
			"c1", 10*time.Second + stopMargin, true, ""},
		{"start", with(func(r *rpc.VolumeTaskRequest) { r.Kind, r.Start = rpc.TaskStart, &rpc.ContainerRef{ID: "web-ab12"} }),
			"web-ab12", startTimeout, true, ""},
		{"pull", with(func(r *rpc.VolumeTaskRequest) {
			r.Kind, r.Pull = rpc.TaskPull, &rpc.PullImageRequest{Image: "app:1", RegistryAuth: "e30"}
		}),
			"app:1", pullTimeout, false, ""},
		{"stop without its request", with(func(r *rpc.VolumeTaskRequest) { r.Kind, r.Start = rpc.TaskStop, &rpc.ContainerRef{ID: "c1"} }), "", 0, false, "stop.id"},
		{"negative grace", with(func(r *rpc.VolumeTaskRequest) {
			r.Kind, r.Stop = rpc.TaskStop, &rpc.StopContainerRequest{ID: "c1", GracePeriodSeconds: -1}
		}), "", 0, false, "stop.grace_period_seconds"},
		{"start without id", with(func(r *rpc.VolumeTaskRequest) { r.Kind, r.Start = rpc.TaskStart, &rpc.ContainerRef{} }), "", 0, false, "start.id"},
		{"pull without image", with(func(r *rpc.VolumeTaskRequest) { r.Kind = rpc.TaskPull }), "", 0, false, "pull.image"},
		{"unknown kind", with(func(r *rpc.VolumeTaskRequest) { r.Kind = "restart" }), "", 0, false, "kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := o.taskJob(c.req)
			if c.field != "" {
				if rpcCode(err) != rpc.CodeInvalidArgument || rpcDetail(err, "field") != c.field {
					t.Fatalf("got %v, want invalid_argument naming %s", err, c.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if j.Key.Volume != "db" || j.Key.Gen != 3 || j.Key.Kind != c.req.Kind || j.Key.Subject != c.subject || j.Timeout != c.timeout || j.Grant != c.grant || j.Run == nil {
				t.Fatalf("job %+v (timeout %s, grant %v)", j.Key, j.Timeout, j.Grant)
			}
		})
	}
}

// TestVolumeTaskDocker: volume_task against a real Docker: the stop is
// admitted on the Writer and answers done (Docker stopped the Container
// once; the same request again reads the result), a start is refused
// on a copy that is not the expected role, and a start on the Writer
// runs the Container again.
func TestVolumeTaskDocker(t *testing.T) {
	to := newTestOps(t)
	id := to.createStart(t, "db", to.spec("db", nil))
	dir := t.TempDir()
	d := &Daemon{cfg: Config{DataDir: dir}, log: hclog.NewNullLogger(), ctrs: to.containerOps,
		rec: machine.Record{ID: "m-test"}}
	// This Machine's copy of db is the Writer, on disk before the feature
	// reads its copy records.
	cs, err := volumecopy.Open(filepath.Join(dir, volumecopy.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Created("db"); err != nil {
		t.Fatal(err)
	}
	volumeTask := route(t, d.volumes().Routes(), rpc.VolumeTask.Name)
	stop := rpc.VolumeTaskRequest{Volume: "db", Gen: 1, Expect: "writer", Kind: rpc.TaskStop, Stop: &rpc.StopContainerRequest{ID: id, GracePeriodSeconds: 1}}
	ask := func(req rpc.VolumeTaskRequest) rpc.VolumeTaskState {
		for deadline := time.Now().Add(time.Minute); ; {
			st, err := call[rpc.VolumeTaskState](t, volumeTask, req)
			if err != nil {
				t.Fatalf("%s: %v", req.Kind, err)
			}
			if st.State != rpc.TaskBusy || time.Now().After(deadline) {
				return st
			}
		}
	}
	if st := ask(stop); st.State != rpc.TaskDone || st.MachineID != "m-test" || st.Subject != id {
		t.Fatalf("stop: %+v", st)
	}
	if st := ask(stop); st.State != rpc.TaskDone || !st.Joined {
		t.Fatalf("stop again: %+v, want the recorded result", st)
	}
	if c, _ := to.inspect(context.Background(), id); c.State == nil || c.State.Running {
		t.Fatalf("after the stop the Container runs")
	}
	start := rpc.VolumeTaskRequest{Volume: "db", Gen: 1, Expect: "mirror", Kind: rpc.TaskStart, Start: &rpc.ContainerRef{ID: id}}
	if _, err := call[rpc.VolumeTaskState](t, volumeTask, start); rpcCode(err) != rpc.CodeFailedPrecond || rpcDetail(err, "field") != "expect" {
		t.Fatalf("start expecting a Mirror on the Writer: %v, want refused naming expect", err)
	}
	start.Expect = "writer"
	if st := ask(start); st.State != rpc.TaskDone {
		t.Fatalf("start: %+v", st)
	}
	if c, _ := to.inspect(context.Background(), id); c.State == nil || !c.State.Running {
		t.Fatalf("after the start the Container does not run")
	}
}

// route is routes' handler of command, as Machine RPC serves it.
func route(t *testing.T, routes []rpc.Route, command string) Handler {
	t.Helper()
	for _, r := range routes {
		if r.Command == command {
			return r.Handler
		}
	}
	t.Fatalf("no route %s", command)
	return nil
}
