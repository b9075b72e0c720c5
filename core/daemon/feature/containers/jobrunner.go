package containers

// What the scheduled-jobs feature (feature/jobs) asks of the Container
// commands: whether this Machine admits a job's run, and starting it as
// a detached one-off run through run_container's own create path.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// AdmitsJob reports whether this Machine runs a job: only when it would
// admit the run's Container (participating, not drained, roles and
// constraints, the Writer of its Provisioned Volumes) and holds its
// Docker volumes: a run mounts the Service's data where it is, never an
// empty copy.
func (o *Ops) AdmitsJob(ctx context.Context, job store.JobBody) bool {
	var spec rpc.ContainerSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return false
	}
	if admit(spec, o.facts()) != nil {
		return false
	}
	for _, m := range spec.Mounts {
		if m.Type == "volume" && m.Source != "" {
			if _, err := o.docker.VolumeInspect(ctx, m.Source); err != nil {
				return false
			}
		}
	}
	return true
}

// JobRunner starts this Machine's job runs; nil without Docker.
func (o *Ops) JobRunner() jobs.Runner {
	if o == nil || o.docker == nil {
		return nil
	}
	return jobRunner{o: o}
}

// jobRunner starts a job's runs as detached one-offs of kind run (the
// run reaper removes them once ended and logged, as `ployz run --detach`
// runs), pulling a missing image without credentials first.
type jobRunner struct{ o *Ops }

func (r jobRunner) Start(ctx context.Context, job store.JobBody, name string) (string, error) {
	var spec rpc.ContainerSpec
	if err := json.Unmarshal(job.Spec, &spec); err != nil {
		return "", fmt.Errorf("job %s/%s: stored spec: %w", job.Namespace, job.Service, err)
	}
	spec.Kind = rpc.KindRun
	if _, err := r.o.docker.ImageInspect(ctx, spec.Image); cerrdefs.IsNotFound(err) {
		if _, err := r.o.pull(ctx, rpc.PullImageRequest{Image: spec.Image}, nil); err != nil {
			return "", fmt.Errorf("pull %s: %w", spec.Image, err)
		}
	}
	req := rpc.RunContainerRequest{CreateContainerRequest: rpc.CreateContainerRequest{Name: name, Spec: spec, Files: job.Files}, Detach: true}
	ob, err := r.o.create(ctx, req.CreateContainerRequest, runCreate(req))
	if err != nil {
		return "", err
	}
	if _, err := r.o.start(ctx, ob.ID); err != nil {
		r.o.discardRun(ctx, ob.ID)
		return "", err
	}
	return ob.ID, nil
}

func (r jobRunner) Wait(ctx context.Context, id string) (int, error) {
	waitC, errC := r.o.docker.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.Error != nil && w.Error.Message != "" {
			return int(w.StatusCode), errors.New(w.Error.Message)
		}
		return int(w.StatusCode), nil
	case err := <-errC:
		if cerrdefs.IsNotFound(err) {
			return 0, jobs.ErrGone
		}
		return 0, err
	}
}
