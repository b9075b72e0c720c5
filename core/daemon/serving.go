package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ployz/ployz/core/machine"
)

// servingRetryEvery paces retries of a serving unit that did not converge.
const servingRetryEvery = 5 * time.Second

// servingUnit is a serving process the daemon derives from the Machine
// record and runs under a runtime unit it writes itself: Internal DNS and
// the Ingress Proxy. The daemon is the only writer of the unit and of its
// spec, and stops it only on a reset (docs/architecture.md, "Serving outlives the
// daemon").
type servingUnit struct {
	what     string // for logs, e.g. "internal dns"
	unit     string // systemd unit name
	unitPath string // where the runtime unit file goes
	specPath string // the spec file the process reads
	// spec derives the spec; check parses it as the process would, so
	// nothing the process would refuse is ever published.
	spec  func() ([]byte, error)
	check func([]byte) error
	// unitFile renders the unit; it carries the binary's digest so a new
	// binary changes the unit and the process is restarted onto it.
	unitFile func() string
	// extra files the process writes, removed on reset.
	extra []string
}

// keepServing publishes u once this Machine participates (a joining
// Machine waits), retrying until the spec and unit are in place.
func (d *Daemon) keepServing(ctx context.Context, u servingUnit) {
	for ctx.Err() == nil {
		if d.record().Phase == machine.Participating {
			err := d.ensureServing(ctx, u)
			if err == nil {
				return
			}
			d.log.Warn(u.what+" not converged; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(servingRetryEvery):
		}
	}
}

// ensureServing writes u's spec and unit when they differ from what the
// record derives, reloads systemd after a unit change and starts the unit
// (restarting it when the unit changed). It runs after the store
// answered, so a process moves to new software only once its store is ready.
func (d *Daemon) ensureServing(ctx context.Context, u servingUnit) error {
	spec, err := u.spec()
	if err != nil {
		return err
	}
	if err := u.check(spec); err != nil {
		return fmt.Errorf("derived %w", err)
	}
	if _, err := writeIfChanged(u.specPath, spec); err != nil {
		return fmt.Errorf("write %s: %w", u.specPath, err)
	}
	unitChanged, err := writeIfChanged(u.unitPath, []byte(u.unitFile()))
	if err != nil {
		return fmt.Errorf("write %s: %w", u.unitPath, err)
	}
	if unitChanged {
		if err := d.cfg.Units.Reload(ctx); err != nil {
			return err
		}
		d.log.Info(u.what+" unit written; restarting it", "unit", u.unit)
		return d.cfg.Units.Restart(ctx, u.unit)
	}
	return d.cfg.Units.Start(ctx, u.unit)
}

// stopServing is the reset path: stop the unit, remove it, its spec and
// the files it wrote.
func (d *Daemon) stopServing(ctx context.Context, u servingUnit) {
	if err := d.cfg.Units.Stop(ctx, u.unit); err != nil {
		d.log.Warn("reset: stop "+u.what, "error", err)
	}
	for _, p := range append([]string{u.specPath, u.unitPath}, u.extra...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("reset: remove", "path", p, "error", err)
		}
	}
	if err := d.cfg.Units.Reload(ctx); err != nil {
		d.log.Warn("reset: systemd reload", "error", err)
	}
}
