package daemon

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/daemon/feature"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// Retire loop timing: superseded Containers are looked for on every
// change of the serving tables (and every retirePeriod while some wait),
// and stopped once every Machine that is not Down acked the pointer that
// left them out, or retireAfter after this loop first saw them
// superseded.
const (
	retirePeriod = 2 * time.Second
	retireAfter  = 300 * time.Second
	// retireHold: a Container is stopped no sooner than this after the
	// loop first saw it superseded, even when every Machine acked. A
	// Deploy that observed it running (a rerun after a partition heals,
	// say) may be about to name it in a newer pointer that has not
	// reached this Machine yet; stopping it then would leave that pointer
	// naming an exited Container.
	retireHold = 10 * time.Second
)

// retireLoop stops this Machine's own running Service Containers that a
// Serving Pointer superseded: created before the pointer moved, and not
// named by it (docs/architecture.md bet 3). It re-derives everything from rows and
// Docker each round; it never starts, places, moves or removes anything.
func (d *Daemon) retireLoop(ctx context.Context) {
	firstSeen := map[string]time.Time{}
	// A Container is superseded only when a pointer moves, and stopped
	// once acks arrive: woken by those tables, and every retirePeriod
	// while superseded Containers wait (for acks or retireAfter).
	w := d.watchStore(ctx, `SELECT id, body FROM serving`, `SELECT id, body FROM serving_acks`)
	for {
		if !pause(ctx, w, waitPeriod(w, retirePeriod, len(firstSeen) > 0)) {
			return
		}
		if d.record().Phase != machine.Participating || d.ctrs.Docker() == nil {
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
	pointers, err := servingfeature.ReadPointers(ctx, st)
	if err != nil || len(pointers) == 0 {
		clear(firstSeen)
		return err
	}
	self := d.record().ID
	rows, err := st.Containers().ListByOwner(ctx, self)
	if err != nil {
		return err
	}
	type candidate struct {
		id, svc string
		p       store.ServingBody
	}
	var superseded []candidate
	for _, r := range rows {
		b := r.Body
		if b.Namespace == "" || b.Service == "" || b.State != "running" {
			continue
		}
		svc := ingress.ServiceKey(b.Namespace, b.Service)
		p, ok := pointers[svc]
		if !ok || p.Has(r.Key, self, b) {
			continue
		}
		in, err := d.ctrs.Docker().ContainerInspect(ctx, r.Key)
		if err != nil || in.State == nil || !in.State.Running || in.Config == nil || !rpc.IsReplica(in.Config.Labels) {
			continue
		}
		created, err := time.Parse(time.RFC3339Nano, in.Created)
		if err != nil || created.UnixMilli() >= p.MovedAt {
			continue // newer than the pointer: a Deploy in flight will name it
		}
		superseded = append(superseded, candidate{r.Key, svc, p})
	}
	seen := map[string]bool{}
	// Acks and membership are read only when something is superseded.
	var v servingfeature.View
	if len(superseded) > 0 {
		if v, err = d.serving().Acks(ctx, st); err != nil {
			return err
		}
	}
	for _, c := range superseded {
		seen[c.id] = true
		if _, ok := firstSeen[c.id]; !ok {
			firstSeen[c.id] = time.Now()
		}
		acked := v.AckedBy(c.svc, c.p.ID)
		waited := time.Since(firstSeen[c.id])
		if waited < retireHold || !acked && waited < retireAfter {
			continue
		}
		d.log.Info("retire: stopping a Container its Serving Pointer superseded", "container", feature.Short(c.id),
			"service", c.svc, "pointer", c.p.ID, "all_acked", acked, "waited", time.Since(firstSeen[c.id]).Round(time.Second))
		if err := d.ctrs.Docker().ContainerStop(ctx, c.id, container.StopOptions{}); err != nil {
			d.log.Warn("retire: stop", "container", feature.Short(c.id), "error", err)
		}
	}
	for id := range firstSeen {
		if !seen[id] {
			delete(firstSeen, id)
		}
	}
	return nil
}
