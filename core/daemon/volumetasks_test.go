package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// TestVolumeTaskDocker: volume_task against a real Docker: the stop is
// admitted on the Writer and answers done (Docker stopped the Container
// once; the same request again reads the result), a start is refused
// on a copy that is not the expected role, and a start on the Writer
// runs the Container again.
func TestVolumeTaskDocker(t *testing.T) {
	to := newTestOps(t)
	id := to.createStart(t, "db", to.Spec("db", nil))
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
			st, err := featuretest.Decode[rpc.VolumeTaskState](t, volumeTask, req)
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
	if c, _ := to.Cli.ContainerInspect(context.Background(), id); c.State == nil || c.State.Running {
		t.Fatalf("after the stop the Container runs")
	}
	start := rpc.VolumeTaskRequest{Volume: "db", Gen: 1, Expect: "mirror", Kind: rpc.TaskStart, Start: &rpc.ContainerRef{ID: id}}
	if _, err := featuretest.Decode[rpc.VolumeTaskState](t, volumeTask, start); featuretest.Code(err) != rpc.CodeFailedPrecond || featuretest.Detail(err, "field") != "expect" {
		t.Fatalf("start expecting a Mirror on the Writer: %v, want refused naming expect", err)
	}
	start.Expect = "writer"
	if st := ask(start); st.State != rpc.TaskDone {
		t.Fatalf("start: %+v", st)
	}
	if c, _ := to.Cli.ContainerInspect(context.Background(), id); c.State == nil || !c.State.Running {
		t.Fatalf("after the start the Container does not run")
	}
}
