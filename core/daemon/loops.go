package daemon

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/sdk/store"
)

// Loop periods. Each loop re-derives everything from rows and Docker, so a
// daemon restart simply resumes it.
const (
	peerPeriod    = 2 * time.Second
	publishPeriod = 30 * time.Second
)

func (d *Daemon) act() *active {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// peerLoop rebuilds the mesh's peers from the replicated machines table
// (plus the join peers while joining), touching WireGuard only when the
// set changed.
func (d *Daemon) peerLoop(ctx context.Context) {
	a := d.act()
	var last string
	departed := newDepartedPeers()
	if d.peerGrace > 0 {
		departed.grace = d.peerGrace
	}
	// Woken by a change of the machines table (a Machine's key,
	// endpoints, membership, or its row signed again when it publishes),
	// polled every peerPeriod while the subscription is not open.
	w := d.watchStore(ctx, `SELECT id, body FROM machines`)
	trusted := trustedWriter{path: d.trustedMachinesPath()}
	for {
		rec := d.record()
		var expires time.Time
		vs, err := d.machineVerdicts(ctx, a.store)
		if err == nil {
			if d.selfRowStale(vs) {
				d.kickPublish()
			}
			// The serving plugins take Container addresses only from the
			// Machines accepted here (sdk/serving.TrustedMachines).
			if err := trusted.write(vs); err != nil {
				d.log.Warn("trust list for the serving plugins not written; retrying", "error", err)
			}
			var peers []mesh.Peer
			peers, expires = departed.merge(peersFromRows(trust.Accepted(vs), rec.ID))
			if rec.Phase == machine.Joining {
				peers = mergePeers(peers, meshPeers(rec.JoinPeers))
			}
			if k := peerKey(peers); k != last {
				if err := a.mesh.SetPeers(peers); err != nil {
					d.log.Warn("mesh peers", "error", err)
				} else {
					d.log.Info("mesh peers updated", "count", len(peers))
					last = k
				}
			}
		}
		if !pause(ctx, w, untilExpiry(waitPeriod(w, peerPeriod, rec.Phase == machine.Joining), expires)) {
			return
		}
	}
}

// untilExpiry shortens wait so the loop wakes when a departed peer's
// grace ends.
func untilExpiry(wait time.Duration, expires time.Time) time.Duration {
	if expires.IsZero() {
		return wait
	}
	if d := time.Until(expires) + 100*time.Millisecond; d < wait {
		return d
	}
	return wait
}

func peersFromRows(rows []store.Row[store.MachineBody], self string) []mesh.Peer {
	var out []mesh.Peer
	for _, r := range rows {
		if r.Key == self {
			continue
		}
		k, err := wgtypes.ParseKey(r.Body.PublicKey)
		if err != nil {
			continue
		}
		subnet, err := netip.ParsePrefix(r.Body.Subnet)
		if err != nil {
			continue
		}
		var eps []netip.AddrPort
		for _, e := range r.Body.Endpoints {
			if ap, err := netip.ParseAddrPort(e); err == nil {
				eps = append(eps, ap)
			}
		}
		out = append(out, mesh.Peer{PublicKey: k, Endpoints: eps, Subnet: subnet})
	}
	return out
}

func mergePeers(a, b []mesh.Peer) []mesh.Peer {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.ContainsFunc(out, func(q mesh.Peer) bool { return q.PublicKey == p.PublicKey }) {
			out = append(out, p)
		}
	}
	return out
}

func peerKey(ps []mesh.Peer) string {
	var parts []string
	for _, p := range ps {
		s := p.PublicKey.String() + "|" + p.Subnet.String()
		for _, e := range p.Endpoints {
			s += "|" + e.String()
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}

// publishLoop writes this Machine's own row now and then: the only
// machines row it writes, apart from enrollment on an operator's request.
func (d *Daemon) publishLoop(ctx context.Context) {
	tick := time.NewTicker(publishPeriod)
	defer tick.Stop()
	for {
		if err := d.publishSelf(ctx); err != nil {
			d.log.Warn("publish machine row", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.republish():
		}
	}
}

func (d *Daemon) republish() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	return d.kick
}

// kickPublish asks publishLoop to write the row now.
func (d *Daemon) kickPublish() {
	d.mu.Lock()
	if d.kick == nil {
		d.kick = make(chan struct{}, 1)
	}
	k := d.kick
	d.mu.Unlock()
	select {
	case k <- struct{}{}:
	default:
	}
}

func (d *Daemon) publishSelf(ctx context.Context) error {
	a := d.act()
	if a == nil || d.record().Phase == machine.Resetting {
		// A resetting Machine is being forgotten: a late write would
		// re-insert the row the remover just deleted.
		return nil
	}
	body := d.selfBody()
	if h, err := a.store.Health(ctx); err == nil {
		body.StoreSite = h.ActorID
	}
	if err := d.signSelf(&body); err != nil {
		return err
	}
	_, err := a.store.Machines().Put(ctx, store.Row[store.MachineBody]{Key: d.record().ID, Owner: d.record().ID, Body: body})
	return err
}

func (d *Daemon) selfBody() store.MachineBody {
	rec := d.record()
	b := store.MachineBody{
		Name:         rec.Name,
		Subnet:       rec.Subnet.String(),
		Phase:        string(rec.Phase),
		Labels:       rec.Labels,
		Version:      version.Version,
		Capabilities: d.rpc.Capabilities(),
		Session:      feature.Session(),
		RPCKey:       d.rpcKey(),
	}
	if k, err := d.publicKey(); err == nil {
		b.PublicKey = k.String()
		b.ManagementIP = meshaddr.ManagementIP(k).String()
	}
	for _, e := range rec.Endpoints {
		b.Endpoints = append(b.Endpoints, e.String())
	}
	return b
}

// joinLoop turns a joining Machine into a participating one once its store
// has caught up to the version vector it was given.
func (d *Daemon) joinLoop(ctx context.Context) {
	if d.record().Phase != machine.Joining {
		return
	}
	a := d.act()
	target := d.record().TargetVersions
	start := time.Now()
	if err := a.store.WaitCaughtUp(ctx, target, 200*time.Millisecond); err != nil {
		d.log.Warn("join: store did not catch up", "error", err)
		return
	}
	rec := d.record()
	rec.Phase = machine.Participating
	rec.TargetVersions = nil
	if err := d.setRecord(rec); err != nil {
		d.log.Error("join", "error", err)
		return
	}
	d.log.Info("participating", "caught_up_in", time.Since(start).Round(time.Millisecond))
	d.kickPublish()
}
