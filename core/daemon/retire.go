package daemon

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/ingress"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// Retire loop timing: superseded Containers are checked every
// retirePeriod and stopped once every Machine that is not Down acked the
// pointer that left them out, or retireAfter after this loop first saw
// them superseded.
const (
	retirePeriod = 2 * time.Second
	retireAfter  = 300 * time.Second
)

// retireLoop stops this Machine's own running Service Containers that a
// Serving Pointer superseded: created before the pointer moved, and not
// named by it (DESIGN.md bet 3). It re-derives everything from rows and
// Docker each round; it never starts, places, moves or removes anything.
func (d *Daemon) retireLoop(ctx context.Context) {
	firstSeen := map[string]time.Time{}
	t := time.NewTicker(retirePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.record().Phase != machine.Participating || d.ctrs == nil || d.ctrs.docker == nil {
			continue
		}
		if err := d.retireRound(ctx, firstSeen); err != nil && ctx.Err() == nil {
			d.log.Debug("retire: round", "error", err)
		}
	}
}

func (d *Daemon) retireRound(ctx context.Context, firstSeen map[string]time.Time) error {
	st, err := d.storeClient()
	if err != nil {
		return err
	}
	v, err := d.readServing(ctx, st)
	if err != nil || len(v.pointers) == 0 {
		clear(firstSeen)
		return err
	}
	self := d.record().ID
	rows, err := st.Containers().ListByOwner(ctx, self)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, r := range rows {
		b := r.Body
		if b.Namespace == "" || b.Service == "" || b.State != "running" {
			continue
		}
		svc := ingress.ServiceKey(b.Namespace, b.Service)
		p, ok := v.pointers[svc]
		if !ok || p.Has(r.Key, self, b) {
			continue
		}
		in, err := d.ctrs.docker.ContainerInspect(ctx, r.Key)
		if err != nil || in.State == nil || !in.State.Running || in.Config == nil || in.Config.Labels[rpc.LabelKind] == "hook" {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, in.Created)
		if err != nil || created.UnixMilli() >= p.MovedAt {
			continue // newer than the pointer: a Deploy in flight will name it
		}
		seen[r.Key] = true
		if _, ok := firstSeen[r.Key]; !ok {
			firstSeen[r.Key] = time.Now()
		}
		acked := v.ackedBy(svc, p.ID)
		if !acked && time.Since(firstSeen[r.Key]) < retireAfter {
			continue
		}
		d.log.Info("retire: stopping a Container its Serving Pointer superseded", "container", short(r.Key),
			"service", svc, "pointer", p.ID, "all_acked", acked, "waited", time.Since(firstSeen[r.Key]).Round(time.Second))
		if err := d.ctrs.docker.ContainerStop(ctx, r.Key, container.StopOptions{}); err != nil {
			d.log.Warn("retire: stop", "container", short(r.Key), "error", err)
		}
	}
	for id := range firstSeen {
		if !seen[id] {
			delete(firstSeen, id)
		}
	}
	return nil
}
