package volprotect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Declared is one volume's stored Policy.
type Declared struct {
	Volume string
	Policy Policy
}

// Volumes is this Machine's volume plugin as the Protector uses it.
type Volumes interface {
	// Snapshots answers volume's snapshots here.
	Snapshots(ctx context.Context, volume string) ([]Snapshot, error)
	// Take snapshots volume as name.
	Take(ctx context.Context, volume, name string) error
	// Destroy destroys volume's snapshot name (no bookmark: automatic
	// snapshots are not what a Sync sends from).
	Destroy(ctx context.Context, volume, name string) error
}

// Config is a Protector's collaborators.
type Config struct {
	// Policies answers the stored policies (every Machine sees all).
	Policies func(context.Context) ([]Declared, error)
	// IsWriter reports whether this Machine holds volume's Writer: only
	// the Writer's Machine snapshots, so one Machine acts per volume.
	IsWriter func(volume string) bool
	Volumes  Volumes
	// Lags, when set, answers volume's Mirrors' last syncs (from the
	// Cluster's Volume Runs) for Outcomes.
	Lags func(ctx context.Context, volume string) ([]Lag, error)
	// Outcomes, when set, is kept up to date for the metrics plugin.
	Outcomes *Outcomes
	// Now is the clock (nil: time.Now); tests compress time with it.
	Now func() time.Time
	Log hclog.Logger
}

// Protector takes and prunes the automatic snapshots of the volumes
// whose Writer is on this Machine. Round is one pass; ployzd loops.
type Protector struct{ cfg Config }

// New returns a Protector with cfg's defaults filled in.
func New(cfg Config) *Protector {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.Outcomes == nil {
		cfg.Outcomes = &Outcomes{}
	}
	return &Protector{cfg: cfg}
}

// Round examines every stored policy once and answers when the next
// snapshot is due among this Machine's Writers (zero: none).
func (p *Protector) Round(ctx context.Context) (time.Time, error) {
	ds, err := p.cfg.Policies(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read volume policies: %w", err)
	}
	var next time.Time
	var errs []error
	var here []string
	defer func() { p.cfg.Outcomes.Keep(here) }()
	for _, d := range ds {
		if !d.Policy.Snapshots.Any() || !p.cfg.IsWriter(d.Volume) {
			continue
		}
		here = append(here, d.Volume)
		n, err := p.volume(ctx, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", d.Volume, err))
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next, errors.Join(errs...)
}

// volume snapshots d's volume when due, then prunes to its retention,
// and brings its Outcomes up to date.
func (p *Protector) volume(ctx context.Context, d Declared) (time.Time, error) {
	now := p.cfg.Now()
	snaps, err := p.cfg.Volumes.Snapshots(ctx, d.Volume)
	if err != nil {
		return time.Time{}, fmt.Errorf("list snapshots: %w", err)
	}
	defer func() { p.observe(ctx, d.Volume, snaps) }()
	due, next := SnapshotDue(d.Policy.Snapshots, newestAuto(snaps), now)
	if name := SnapshotName(now); due && !slices.ContainsFunc(snaps, func(s Snapshot) bool { return s.Name == name }) {
		if err := p.cfg.Volumes.Take(ctx, d.Volume, name); err != nil {
			p.cfg.Outcomes.Count(d.Volume, ResultFailed)
			return next, fmt.Errorf("snapshot %s: %w", name, err)
		}
		p.cfg.Outcomes.Count(d.Volume, ResultTaken)
		p.cfg.Log.Info("took scheduled snapshot", "volume", d.Volume, "snapshot", name)
		snaps = append(snaps, Snapshot{Name: name, Created: now})
	}
	for _, name := range Keep(snaps, d.Policy.Snapshots, now).Prune {
		if err := p.cfg.Volumes.Destroy(ctx, d.Volume, name); err != nil {
			return next, fmt.Errorf("prune %s: %w", name, err)
		}
		p.cfg.Outcomes.Count(d.Volume, ResultPruned)
		snaps = slices.DeleteFunc(snaps, func(s Snapshot) bool { return s.Name == name })
		p.cfg.Log.Info("pruned scheduled snapshot", "volume", d.Volume, "snapshot", name)
	}
	return next, nil
}

// observe records volume's newest automatic snapshot and, when Lags is
// set, its Mirrors' last syncs (unreadable: left out, logged).
func (p *Protector) observe(ctx context.Context, volume string, snaps []Snapshot) {
	var lags []Lag
	if p.cfg.Lags != nil {
		var err error
		if lags, err = p.cfg.Lags(ctx, volume); err != nil {
			p.cfg.Log.Debug("mirror lag unknown", "volume", volume, "error", err)
		}
	}
	p.cfg.Outcomes.Observe(volume, newestAuto(snaps), lags)
}

// newestAuto is the creation time of snaps' newest automatic snapshot.
func newestAuto(snaps []Snapshot) time.Time {
	var t time.Time
	for _, s := range snaps {
		if IsAuto(s.Name) && s.Created.After(t) {
			t = s.Created
		}
	}
	return t
}
