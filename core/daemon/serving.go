package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/observe"
)

// servingRetryEvery paces retries of a serving plugin's configuration, and
// its refresh once configured (resolv.conf may change).
const (
	servingRetryEvery   = 5 * time.Second
	servingRefreshEvery = 30 * time.Second
)

// Host-wide things the reset and upgrade paths remove, variables so that
// a test aims them at its own files and iptables chain, never at this host's.
var (
	dnsSpecFile      = dns.DefaultSpecPath
	ingressSpecFile  = ingress.DefaultSpecPath
	metricsSpecFile  = observe.DefaultMetricsSpecPath
	inputChainPrefix = "" // dockernet's default, PLOYZ
	// runtimeUnitDir is where earlier ployzd versions wrote their units
	// (retireOldServingUnits).
	runtimeUnitDir = "/run/systemd/system"
)

// servingPlugin is a data-plane plugin whose configuration the daemon
// derives from the Machine record: Internal DNS and the Ingress Proxy. Like
// every plugin it runs long-lived under ployz-plugin@<name>.service, is
// installed and verified by the plugin host, and keeps serving while ployzd
// stops (docs/architecture.md, "Serving outlives the daemon"). The daemon
// only hands it its spec through Configure (Host.SetConfig).
type servingPlugin struct {
	name string // plugin name, e.g. "dns"
	what string // for logs, e.g. "internal dns"
	// spec derives the spec; check parses it as the plugin would, so
	// nothing the plugin would refuse is ever sent.
	spec  func() ([]byte, error)
	check func([]byte) error
	// kept are the files the plugin keeps (its spec, its status), removed
	// on reset once its unit stopped.
	kept []string
	// accepted reports whether this Machine runs p at all (nil: always).
	// While it does not, p's spec is withdrawn and its unit stopped, so
	// nothing of it listens; the unit the plugin host starts again waits
	// unconfigured (the ingress acceptance flag, ployz.accepts).
	accepted func() bool
}

// keepConfigured hands p its spec once this Machine participates (a
// joining Machine waits), retrying until the host took it, then refreshing.
// While the Machine does not accept p (p.accepted) it withdraws p instead,
// once per change of the record.
func (d *Daemon) keepConfigured(ctx context.Context, p servingPlugin) {
	withdrawn := false
	for ctx.Err() == nil {
		wait := servingRetryEvery
		// Taken before reading the record, so a change in between wakes us.
		changed := d.recordChange()
		switch {
		case d.record().Phase != machine.Participating:
		case p.accepted != nil && !p.accepted():
			if !withdrawn {
				withdrawn = d.withdraw(ctx, p)
			}
			if withdrawn {
				wait = servingRefreshEvery
			}
		default:
			withdrawn = false
			if err := d.configure(ctx, p); err != nil {
				d.log.Warn(p.what+" not configured; retrying", "plugin", p.name, "error", err)
			} else {
				wait = servingRefreshEvery
			}
		}
		// A Machine that just joined configures its plugins at once, not at
		// the next retry: its DNS, ingress and Log Store serve sooner.
		select {
		case <-ctx.Done():
		case <-changed:
		case <-time.After(wait):
		}
	}
}

func (d *Daemon) configure(ctx context.Context, p servingPlugin) error {
	spec, err := p.spec()
	if err != nil {
		return err
	}
	if err := p.check(spec); err != nil {
		return fmt.Errorf("derived %w", err)
	}
	if d.plugins == nil {
		return errors.New("no plugin host")
	}
	return d.plugins.SetConfig(ctx, p.name, spec)
}

// withdraw stops p on a Machine that does not accept it: the host's
// config for it is cleared (a process started again waits unconfigured),
// and when its spec file exists, meaning it serves or may, the spec and
// status go and its unit stops, which closes the sockets it parked in
// systemd's fd store. The trust list stays: other plugins read it. It
// reports whether the host took the cleared config.
func (d *Daemon) withdraw(ctx context.Context, p servingPlugin) bool {
	cleared := d.plugins != nil
	if cleared {
		if err := d.plugins.SetConfig(ctx, p.name, nil); err != nil {
			d.log.Warn(p.what+": config not cleared; retrying", "plugin", p.name, "error", err)
			cleared = false
		}
	}
	if _, err := os.Stat(p.kept[0]); errors.Is(err, os.ErrNotExist) {
		return cleared
	}
	d.log.Info("this Machine does not accept "+p.what+": withdrawing its spec and stopping it", "plugin", p.name)
	own := slices.DeleteFunc(slices.Clone(p.kept), func(f string) bool { return f == d.trustedMachinesPath() })
	d.removeFiles(own)
	if err := d.cfg.Units.Stop(ctx, pluginhost.UnitName(p.name)); err != nil {
		d.log.Warn("stop "+p.what, "error", err)
	}
	d.removeFiles(own)
	return cleared
}

// stopServing is the reset path: withdraw p's spec, remove the files it
// kept, then stop its unit (which releases its parked sockets). The files
// go first so that the process the host starts again finds no spec and
// waits, unconfigured; they are removed once more after the stop in case
// the old process rewrote one (its status) meanwhile.
func (d *Daemon) stopServing(ctx context.Context, p servingPlugin) {
	if d.plugins != nil {
		if err := d.plugins.SetConfig(ctx, p.name, nil); err != nil {
			d.log.Warn("reset: withdraw spec", "plugin", p.name, "error", err)
		}
	}
	d.removeFiles(p.kept)
	if err := d.cfg.Units.Stop(ctx, pluginhost.UnitName(p.name)); err != nil {
		d.log.Warn("reset: stop "+p.what, "error", err)
	}
	d.removeFiles(p.kept)
}

func (d *Daemon) removeFiles(paths []string) {
	for _, path := range paths {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("reset: remove", "path", path, "error", err)
		}
	}
}

// needCapability refuses a Machine RPC whose plugin capability no healthy
// plugin serves now, naming it in details.capability.
func (d *Daemon) needCapability(capability string) error {
	if d.plugins == nil || d.plugins.Available(capability) {
		return nil
	}
	return rpc.Errorf(rpc.CodeUnavailable, "capability %s is not served on this Machine right now (see `ployz machine inspect`)", capability).
		With("capability", capability)
}

// oldServingUnits are the runtime units earlier ployzd versions wrote for
// DNS and ingress themselves, before both became plugins.
var oldServingUnits = []string{"ployz-dns.service", "ployz-ingress.service"}

// retireOldServingUnits stops and removes those units when an upgrade
// finds them, before the plugin host starts ployz-plugin@dns and
// @ingress-caddy, which bind the same ports and read the same spec files.
func (d *Daemon) retireOldServingUnits(ctx context.Context, unitDir string) {
	removed := false
	for _, u := range oldServingUnits {
		path := filepath.Join(unitDir, u)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		d.log.Info("retiring the runtime unit of an earlier ployzd; its plugin takes over", "unit", u)
		if err := d.cfg.Units.Stop(ctx, u); err != nil {
			d.log.Warn("stop old unit", "unit", u, "error", err)
		}
		if err := os.Remove(path); err != nil {
			d.log.Warn("remove old unit", "path", path, "error", err)
		}
		removed = true
	}
	if removed {
		if err := d.cfg.Units.Reload(ctx); err != nil {
			d.log.Warn("systemd reload", "error", err)
		}
	}
}
