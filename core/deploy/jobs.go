package deploy

import (
	"fmt"
	"slices"

	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
)

// ModeJob is a scheduled job's mode in a plan's summary: no replicas,
// one run per tick.
const ModeJob = "job"

// Job is a scheduled job as a plan stores it: its schedule and the spec
// its runs start from (kind run, as `ployz run` copies a Service's).
type Job struct {
	Service  string            `json:"service"`
	Schedule jobs.Schedule     `json:"schedule"`
	Spec     rpc.ContainerSpec `json:"spec"`
}

// planJob plans a job Service: no long-running Container (one left from
// when it was a Service is stopped), and the run spec to store.
// warn says when no observed Machine would run its ticks.
func planJob(ns string, svc Service, snap Snapshot, depID string) (rows []Row, sum ServiceSummary, job Job, warn string, err error) {
	as := svc
	as.Mode, as.Replicas, as.Schedule = ModeReplicated, 0, nil
	rows, sum, _, err = planService(ns, as, snap, depID, nil, PullMissing, false)
	if err != nil {
		return nil, sum, Job{}, "", err
	}
	sum.Mode, sum.Desired = ModeJob, 0
	if _, _, err := eligible(ns, svc, snap); err != nil {
		// Stored anyway: a Machine may become eligible before a tick.
		warn = fmt.Sprintf("job %q: no observed Machine would run its ticks now: %v", svc.Name, err)
	}
	spec := serviceSpec(ns, svc)
	spec.ServiceID, spec.DeploymentID = sum.ServiceID, depID
	return rows, sum, Job{Service: svc.Name, Schedule: *svc.Schedule, Spec: RunSpec(spec, nil)}, warn, nil
}

// RunSpec is the spec of a one-off run of a Service whose Containers'
// spec is base: kind run, argv (when given) replacing the image's
// entrypoint and the Service's command, and none of what would make it a
// replica (ports, healthcheck, ingress, network aliases, readiness,
// restarts). It keeps the networks, so it resolves the aliases the
// Service resolves.
func RunSpec(base rpc.ContainerSpec, argv []string) rpc.ContainerSpec {
	spec := base
	spec.Kind, spec.SpecHash = rpc.KindRun, ""
	if len(argv) > 0 {
		spec.Entrypoint, spec.Command = slices.Clone(argv[:1]), slices.Clone(argv[1:])
	}
	spec.Ports, spec.Healthcheck, spec.Ingress, spec.Aliases = nil, nil, nil, nil
	spec.Readiness, spec.Restart = ReadyNone, "no"
	return spec
}
