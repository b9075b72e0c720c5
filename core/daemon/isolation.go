package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// Namespace isolation (dockernet/isolate.go): every Machine's kernel lets
// a Container reach only the Containers of its own namespace. The
// membership comes from the containers rows, followed by subscription; the
// last one committed is saved so a reboot restores it before the store
// answers.

// isolationFile keeps the last membership committed, in the data dir.
const isolationFile = dockernet.SavedFile

// isolationPeriod re-reads the rows while the subscriptions are down.
const isolationPeriod = 2 * time.Second

// isolation is the state of this Machine's isolation rules.
type isolation struct {
	mu  sync.Mutex
	cfg *dockernet.Config // nil: forwarding not ensured, nothing enforced
	key string            // the membership the kernel holds
	gen int64
	at  time.Time
	iso dockernet.Isolation
	err error
}

// isolationOf computes the membership from the containers rows: each
// network's Container addresses that the row's owner (a participating
// Machine, by the machines rows) vouches for. A row's networks are its
// namespace's alone unless it names others (compose networks); a network
// its namespace may not be on (another namespace's) is left out. An address two rows claim
// (reused before the old row went) belongs to the newer Container only,
// so the old namespace never reaches its successor. Rows of Containers
// that ended hold no address; a container without a namespace is open.
func isolationOf(rows []store.Row[store.ContainerBody], ms serving.Machines) dockernet.Isolation {
	type claim struct {
		ns, key  string
		networks []string
		created  int64
	}
	won := map[netip.Addr]claim{}
	for _, r := range rows {
		b := r.Body
		if b.IP == "" || b.State == "exited" || b.State == "dead" {
			continue
		}
		a, err := netip.ParseAddr(b.IP)
		if err != nil || !a.Unmap().Is4() {
			continue
		}
		a = a.Unmap()
		if ms.Vouched(r.Owner, a) != nil {
			continue
		}
		c := claim{ns: b.Namespace, key: r.Key, networks: b.IsolationNetworks(), created: b.CreatedAt}
		if old, ok := won[a]; ok && (old.created > c.created || old.created == c.created && old.key > c.key) {
			continue
		}
		won[a] = c
	}
	iso := dockernet.Isolation{Cluster: ms.Network, Networks: map[string][]netip.Addr{}}
	for a, c := range won {
		if c.ns == "" { // no namespace label: the operator's own
			iso.Open = append(iso.Open, a)
			continue
		}
		for _, n := range c.networks {
			iso.Networks[n] = append(iso.Networks[n], a)
		}
	}
	sort.Slice(iso.Open, func(i, j int) bool { return iso.Open[i].Less(iso.Open[j]) })
	for _, as := range iso.Networks {
		sort.Slice(as, func(i, j int) bool { return as[i].Less(as[j]) })
	}
	return iso
}

// isolationLoop keeps the rules in step with the containers and machines
// rows, woken by their subscriptions.
func (d *Daemon) isolationLoop(ctx context.Context) {
	a := d.act()
	w := d.watchStore(ctx, `SELECT id, owner, body FROM containers`, `SELECT id, body FROM machines`)
	// Every idlePeriod the chains are rewritten even when the rows did
	// not change (one atomic replacement): rules someone flushed come
	// back. Timed apart from the wakes, which a busy table never stops.
	var rewritten time.Time
	for {
		rewrite := time.Since(rewritten) >= idlePeriod
		err := d.enforceIsolation(ctx, a.store, rewrite)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("namespace isolation not updated; the rules before hold", "error", err)
		}
		if err == nil && rewrite {
			rewritten = time.Now()
		}
		wait := waitPeriod(w, isolationPeriod, false)
		if until := time.Until(rewritten.Add(idlePeriod)); until < wait {
			wait = max(until, isolationPeriod) // a failing rewrite retries at that pace
		}
		if !pause(ctx, w, wait) {
			return
		}
	}
}

// enforceIsolation reads the rows and commits the membership when it
// changed, or whatever it is when rewrite is set.
func (d *Daemon) enforceIsolation(ctx context.Context, st *store.Client, rewrite bool) error {
	d.iso.mu.Lock()
	cfg := d.iso.cfg
	d.iso.mu.Unlock()
	if cfg == nil {
		return nil
	}
	rows, err := st.Containers().List(ctx)
	if err != nil {
		return fmt.Errorf("read containers: %w", err)
	}
	mrows, err := st.Machines().List(ctx)
	if err != nil {
		return fmt.Errorf("read machines: %w", err)
	}
	ms := serving.MachinesOf(mrows)
	ms.Network = clusterNetwork(d.record())
	return d.commitIsolation(*cfg, isolationOf(rows, ms), rewrite)
}

// commitIsolation programs iso unless the kernel holds it already (as
// far as this daemon knows: rewrite commits it anyway, one atomic
// replacement), and saves a changed membership for the next boot.
func (d *Daemon) commitIsolation(cfg dockernet.Config, iso dockernet.Isolation, rewrite bool) error {
	d.iso.mu.Lock()
	defer d.iso.mu.Unlock()
	key := iso.Key()
	same := key == d.iso.key && d.iso.err == nil
	if same && !rewrite {
		return nil
	}
	if err := dockernet.EnsureIsolation(cfg, iso); err != nil {
		d.iso.err = err
		return err
	}
	d.iso.err = nil
	if same {
		return nil
	}
	d.iso.key, d.iso.iso = key, iso
	d.iso.gen++
	d.iso.at = time.Now().UTC()
	d.log.Info("namespace isolation updated", "generation", d.iso.gen, "networks", len(iso.Networks), "addresses", iso.Addresses())
	if err := dockernet.SaveIsolation(filepath.Join(d.cfg.DataDir, isolationFile), cfg.Subnet, iso); err != nil {
		d.log.Warn("namespace isolation not saved for the next boot", "error", err)
	}
	return nil
}

// startIsolation is called once forwarding is ensured: it restores the
// membership saved by the last run (a reboot emptied the kernel's
// rules; Containers Docker restarts must not meet an open network), then
// lets isolationLoop follow the store.
func (d *Daemon) startIsolation(cfg dockernet.Config) {
	d.iso.mu.Lock()
	d.iso.cfg = &cfg
	d.iso.mu.Unlock()
	d.ensureBootRestore()
	iso, _, err := dockernet.LoadIsolation(filepath.Join(d.cfg.DataDir, isolationFile))
	if errors.Is(err, os.ErrNotExist) {
		return // first start, or an upgrade: open until the store is read
	}
	if err != nil {
		d.log.Warn("saved namespace isolation unreadable; open until the store is read", "error", err)
		return
	}
	if err := dockernet.EnsureIsolation(cfg, iso); err != nil {
		d.log.Warn("saved namespace isolation not restored", "error", err)
	}
}

// forget drops the state when a reset removed the chains.
func (i *isolation) forget() {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cfg, i.key, i.gen, i.at, i.iso, i.err = nil, "", 0, time.Time{}, dockernet.Isolation{}, nil
}

// isolationView is what machine inspect shows.
func (d *Daemon) isolationView() *rpc.IsolationView {
	d.iso.mu.Lock()
	defer d.iso.mu.Unlock()
	if d.iso.cfg == nil {
		return nil
	}
	v := &rpc.IsolationView{Generation: d.iso.gen, Networks: len(d.iso.iso.Networks), Addresses: d.iso.iso.Addresses()}
	if !d.iso.at.IsZero() {
		v.ChangedAt = d.iso.at.Format(time.RFC3339)
	}
	if d.iso.err != nil {
		v.Error = d.iso.err.Error()
	}
	return v
}

// ensureBootRestore installs the Docker unit's drop-in that restores the
// saved rules before dockerd starts at boot (dockernet.BootDropIn): ployzd
// itself starts after dockerd, which has restarted the Containers by then.
func (d *Daemon) ensureBootRestore() {
	if d.cfg.UnitDir == "" {
		return
	}
	changed, err := dockernet.EnsureBootDropIn(d.cfg.UnitDir)
	if err != nil {
		d.log.Warn("namespace isolation will not be restored before Docker at the next boot", "error", err)
		return
	}
	if changed && d.cfg.Units != nil {
		if err := d.cfg.Units.Reload(context.Background()); err != nil {
			d.log.Warn("systemd reload after writing Docker's drop-in", "error", err)
		}
	}
}
