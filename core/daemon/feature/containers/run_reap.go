package containers

import (
	"context"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/ployz/ployz/core/rpc"
)

// reapPeriod is how often the daemon looks for one-off runs to collect.
const reapPeriod = 5 * time.Second

// ReapLoop collects this Machine's one-off runs whose client is gone:
// detached runs that ended, runs a restarted daemon no longer relays. It
// reaps only while participating() and with Docker.
func (o *Ops) ReapLoop(ctx context.Context, participating func() bool) {
	t := time.NewTicker(reapPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !participating() || o.Docker() == nil {
			continue
		}
		if err := o.reapRuns(ctx, time.Now()); err != nil && ctx.Err() == nil {
			o.log.Debug("runs: reap", "error", err)
		}
	}
}

// reapAction is what the reaper does with one run.
type reapAction int

const (
	reapLeave      reapAction = iota
	reapStop                  // running with its terminal gone
	reapRemove                // ended (or never started), not kept
	reapWhenLogged            // ended: removed once the Log Store holds its output
)

// reapVerdict decides for a run that no handler of this process relays,
// in state created long ago (created, unix seconds) at now.
func reapVerdict(state string, labels map[string]string, created int64, now time.Time) reapAction {
	keep, attached := labels[rpc.LabelRunKeep] == "1", labels[rpc.LabelRunAttached] == "1"
	switch state {
	case "running", "restarting", "paused":
		if attached {
			return reapStop
		}
	case "created":
		// Its handler went away between create and start.
		if now.Sub(time.Unix(created, 0)) > runOrphanAfter {
			return reapRemove
		}
	case "exited", "dead":
		if !keep {
			return reapWhenLogged
		}
	}
	return reapLeave
}

// reapRuns applies reapVerdict to each run of this Machine.
func (o *Ops) reapRuns(ctx context.Context, now time.Time) error {
	list, err := o.docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", rpc.LabelKind+"="+rpc.KindRun))})
	if err != nil {
		return dockerErr(err, "list runs")
	}
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		if o.runs.owns(name) {
			continue
		}
		switch reapVerdict(c.State, c.Labels, c.Created, now) {
		case reapStop:
			o.stopRun(c.ID, "no client is attached to it any more")
		case reapRemove:
			o.removeRunNow(ctx, c.ID)
		case reapWhenLogged:
			if o.endedAndLogged(ctx, c.ID, now) {
				o.removeRunNow(ctx, c.ID)
			}
		}
	}
	return nil
}

// endedAndLogged reports whether an ended run may go: the Log Store holds
// its output, or it ended runOrphanAfter ago (a Log Store that cannot be
// asked now may be back by then).
func (o *Ops) endedAndLogged(ctx context.Context, id string, now time.Time) bool {
	if held, err := o.logsSettled(ctx, id); held && err == nil {
		return true
	}
	c, err := o.inspect(ctx, id)
	if err != nil || c.State == nil {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt)
	return err == nil && now.Sub(t) > runOrphanAfter
}

func (o *Ops) removeRunNow(ctx context.Context, id string) {
	if _, err := o.remove(ctx, id, true); err != nil {
		o.log.Warn("runs: remove an ended run", "container", short(id), "error", err)
		return
	}
	o.log.Info("runs: removed an ended run", "container", short(id))
}
