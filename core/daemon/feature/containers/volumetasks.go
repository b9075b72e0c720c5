package containers

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// How long each task kind's Docker call may take: a stop gets its grace
// (Docker's own 10 s when none) and a margin for Docker's kill; a start
// a couple of minutes; a pull the time a large image needs.
const (
	stopMargin   = 30 * time.Second
	startTimeout = 2 * time.Minute
	pullTimeout  = 30 * time.Minute
)

// TaskJob is the Docker call req's kind names, through the same steps
// (and checks) as stop_container, start_container and pull_image.
func (o *Ops) TaskJob(req rpc.VolumeTaskRequest) (volumecopy.Job, error) {
	key := volumecopy.TaskKey{Volume: req.Volume, Gen: req.Gen, Kind: req.Kind}
	none := volumecopy.Job{}
	switch req.Kind {
	case rpc.TaskStop:
		if req.Stop == nil || req.Stop.ID == "" {
			return none, rpc.InvalidField("stop.id", "required for kind %s", req.Kind)
		}
		if err := validStop(*req.Stop, "stop."); err != nil {
			return none, err
		}
		stop := *req.Stop
		key.Subject = stop.ID
		grace := time.Duration(stop.GracePeriodSeconds) * time.Second
		if grace == 0 {
			grace = 10 * time.Second // Docker's default
		}
		return volumecopy.Job{Key: key, Timeout: grace + stopMargin, Grant: true, Run: func(ctx context.Context) error {
			_, err := o.stop(ctx, stop)
			return err
		}}, nil
	case rpc.TaskStart:
		if req.Start == nil || req.Start.ID == "" {
			return none, rpc.InvalidField("start.id", "required for kind %s", req.Kind)
		}
		id := req.Start.ID
		key.Subject = id
		return volumecopy.Job{Key: key, Timeout: startTimeout, Grant: true, Run: func(ctx context.Context) error {
			_, err := o.start(ctx, id)
			return err
		}}, nil
	case rpc.TaskPull:
		if req.Pull == nil || req.Pull.Image == "" {
			return none, rpc.InvalidField("pull.image", "required for kind %s", req.Kind)
		}
		// The credential lives in this closure only, until the pull ends.
		pull := *req.Pull
		key.Subject = pull.Image
		return volumecopy.Job{Key: key, Timeout: pullTimeout, Run: func(ctx context.Context) error {
			_, err := o.pull(ctx, pull, nil)
			return err
		}}, nil
	}
	return none, rpc.InvalidField("kind", "%q is not a task kind (stop, start or pull)", req.Kind)
}
