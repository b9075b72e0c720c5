package containers

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
)

// TestTaskJob: volume_task's kinds map to their Docker step, keyed by
// Container or image, bounded by the kind's timeout; only the Container
// steps hold the mount grant; a missing or bad kind request names its
// field.
func TestTaskJob(t *testing.T) {
	o := &Ops{}
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
			j, err := o.TaskJob(c.req)
			if c.field != "" {
				if featuretest.Code(err) != rpc.CodeInvalidArgument || featuretest.Detail(err, "field") != c.field {
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
