package serving

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
)

// RetryEvery paces retries of a serving plugin's configuration, and
// RefreshEvery its refresh once configured (resolv.conf may change).
const (
	RetryEvery   = 5 * time.Second
	RefreshEvery = 30 * time.Second
)

// Plugin is a data-plane plugin whose configuration the daemon derives
// from the Machine record: Internal DNS, the Ingress Proxy, the Observe
// Store and volume plugins. Like every plugin it runs long-lived under
// ployz-plugin@<name>.service, is installed and verified by the plugin
// host, and keeps serving while ployzd stops (docs/architecture.md,
// "Serving outlives the daemon"). The daemon only hands it its spec
// through Configure (Configs.SetConfig).
type Plugin struct {
	Name string // plugin name, e.g. "dns"
	What string // for logs, e.g. "internal dns"
	// Spec derives the spec; Check parses it as the plugin would, so
	// nothing the plugin would refuse is ever sent.
	Spec  func() ([]byte, error)
	Check func([]byte) error
	// Kept are the files the plugin keeps (its spec, its status), removed
	// on reset once its unit stopped.
	Kept []string
	// Accepted reports whether this Machine runs p at all (nil: always).
	// While it does not, p's spec is withdrawn and its unit stopped, so
	// nothing of it listens; the unit the plugin host starts again waits
	// unconfigured (the ingress acceptance flag, ployz.accepts).
	Accepted func() bool
}

// Keep hands p its spec once this Machine participates (a joining
// Machine waits), retrying until the host took it, then refreshing.
// While the Machine does not accept p (p.Accepted) it withdraws p
// instead, once per change of the record.
func (f *Feature) Keep(ctx context.Context, p Plugin) {
	withdrawn := false
	for ctx.Err() == nil {
		wait := RetryEvery
		// Taken before reading the record, so a change in between wakes us.
		changed := f.host.RecordChange()
		switch {
		case f.host.Machine().Phase != machine.Participating:
		case p.Accepted != nil && !p.Accepted():
			if !withdrawn {
				withdrawn = f.withdraw(ctx, p)
			}
			if withdrawn {
				wait = RefreshEvery
			}
		default:
			withdrawn = false
			if err := f.Configure(ctx, p); err != nil {
				f.log.Warn(p.What+" not configured; retrying", "plugin", p.Name, "error", err)
			} else {
				wait = RefreshEvery
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

// Configure hands p the spec it derives now, checked first.
func (f *Feature) Configure(ctx context.Context, p Plugin) error {
	spec, err := p.Spec()
	if err != nil {
		return err
	}
	if err := p.Check(spec); err != nil {
		return fmt.Errorf("derived %w", err)
	}
	cfg := f.host.PluginConfigs()
	if cfg == nil {
		return errors.New("no plugin host")
	}
	return cfg.SetConfig(ctx, p.Name, spec)
}

// withdraw stops p on a Machine that does not accept it: the host's
// config for it is cleared (a process started again waits unconfigured),
// and when its spec file exists, meaning it serves or may, the spec and
// status go and its unit stops, which closes the sockets it parked in
// systemd's fd store. The trust list stays: other plugins read it. It
// reports whether the host took the cleared config.
func (f *Feature) withdraw(ctx context.Context, p Plugin) bool {
	cfg := f.host.PluginConfigs()
	cleared := cfg != nil
	if cleared {
		if err := cfg.SetConfig(ctx, p.Name, nil); err != nil {
			f.log.Warn(p.What+": config not cleared; retrying", "plugin", p.Name, "error", err)
			cleared = false
		}
	}
	if _, err := os.Stat(p.Kept[0]); errors.Is(err, os.ErrNotExist) {
		return cleared
	}
	f.log.Info("this Machine does not accept "+p.What+": withdrawing its spec and stopping it", "plugin", p.Name)
	trusted := f.host.TrustedMachinesPath()
	own := slices.DeleteFunc(slices.Clone(p.Kept), func(file string) bool { return file == trusted })
	f.removeFiles(own)
	if err := f.host.Units().Stop(ctx, pluginhost.UnitName(p.Name)); err != nil {
		f.log.Warn("stop "+p.What, "error", err)
	}
	f.removeFiles(own)
	return cleared
}

// Stop is the reset path: withdraw p's spec, remove the files it kept,
// then stop its unit (which releases its parked sockets). The files go
// first so that the process the host starts again finds no spec and
// waits, unconfigured; they are removed once more after the stop in case
// the old process rewrote one (its status) meanwhile.
func (f *Feature) Stop(ctx context.Context, p Plugin) {
	if cfg := f.host.PluginConfigs(); cfg != nil {
		if err := cfg.SetConfig(ctx, p.Name, nil); err != nil {
			f.log.Warn("reset: withdraw spec", "plugin", p.Name, "error", err)
		}
	}
	f.removeFiles(p.Kept)
	if err := f.host.Units().Stop(ctx, pluginhost.UnitName(p.Name)); err != nil {
		f.log.Warn("reset: stop "+p.What, "error", err)
	}
	f.removeFiles(p.Kept)
}

func (f *Feature) removeFiles(paths []string) {
	for _, path := range paths {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			f.log.Warn("reset: remove", "path", path, "error", err)
		}
	}
}

// needCapability refuses a Machine RPC whose plugin capability no healthy
// plugin serves now, naming it in details.capability.
func (f *Feature) needCapability(capability string) error {
	p := f.host.Plugins()
	if p == nil || p.Available(capability) {
		return nil
	}
	return rpc.Errorf(rpc.CodeUnavailable, "capability %s is not served on this Machine right now (see `ployz machine inspect`)", capability).
		With("capability", capability)
}

// oldServingUnits are the runtime units earlier ployzd versions wrote for
// DNS and ingress themselves, before both became plugins.
var oldServingUnits = []string{"ployz-dns.service", "ployz-ingress.service"}

// RetireOldUnits stops and removes those units in unitDir when an
// upgrade finds them, before the plugin host starts ployz-plugin@dns and
// @ingress-caddy, which bind the same ports and read the same spec files.
func (f *Feature) RetireOldUnits(ctx context.Context, unitDir string) {
	removed := false
	for _, u := range oldServingUnits {
		path := filepath.Join(unitDir, u)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		f.log.Info("retiring the runtime unit of an earlier ployzd; its plugin takes over", "unit", u)
		if err := f.host.Units().Stop(ctx, u); err != nil {
			f.log.Warn("stop old unit", "unit", u, "error", err)
		}
		if err := os.Remove(path); err != nil {
			f.log.Warn("remove old unit", "path", path, "error", err)
		}
		removed = true
	}
	if removed {
		if err := f.host.Units().Reload(ctx); err != nil {
			f.log.Warn("systemd reload", "error", err)
		}
	}
}

// Apply hands ps a label's change at once instead of at their next
// refresh (RefreshEvery), on a participating Machine; a failure is left
// to that refresh. what names the change in the log.
func (f *Feature) Apply(ctx context.Context, what string, ps ...Plugin) {
	if f.host.Machine().Phase != machine.Participating {
		return
	}
	for _, p := range ps {
		if err := f.Configure(ctx, p); err != nil {
			f.log.Warn(what+" not applied yet; the next refresh retries", "plugin", p.Name, "error", err)
		}
	}
}
