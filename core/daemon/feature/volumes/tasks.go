package volumes

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/volume"
)

// volumeTask is volume_task: a Volume Run's Container step admitted
// against this Machine's copy of the volume and run in a task that
// outlives the request (core/volumecopy's Tasks).
func (f *Feature) volumeTask(ctx context.Context, req rpc.VolumeTaskRequest) (rpc.VolumeTaskState, error) {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.VolumeTaskState{}, rpc.InvalidField("volume", "%v", err)
	}
	if f.host.Docker() == nil {
		return rpc.VolumeTaskState{}, rpc.Errorf(rpc.CodeUnavailable, "docker is not available on this Machine")
	}
	job, err := f.host.TaskJob(req)
	if err != nil {
		return rpc.VolumeTaskState{}, err
	}
	cs, err := f.volumeCopies()
	if err != nil {
		return rpc.VolumeTaskState{}, err
	}
	st, err := f.tasks.Do(ctx, job, func(start func()) error {
		return cs.Admit(ctx, req.Volume, req.Gen, req.Expect, func() {
			f.log.Info("volume task", "volume", req.Volume, "gen", req.Gen, "kind", req.Kind, "subject", job.Key.Subject)
			start()
		})
	})
	if err != nil {
		return rpc.VolumeTaskState{}, err
	}
	st.MachineID = f.host.MachineID()
	return st, nil
}

// taskEnded logs what Docker answered a task.
func (f *Feature) taskEnded(k volumecopy.TaskKey, err error, took time.Duration) {
	l := f.log.With("volume", k.Volume, "gen", k.Gen, "kind", k.Kind, "subject", k.Subject, "took", took.Round(time.Millisecond))
	if err != nil {
		l.Warn("volume task failed", "error", err)
		return
	}
	l.Info("volume task done")
}
