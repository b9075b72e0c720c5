package volumerun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/volume"
)

// Snapshots lists machine's snapshots of volume name, each with whether
// the volume's x-volume retention keeps it (list_volume_snapshots);
// without machine, the Writer's (or the one copy's). It answers the
// Machine it asked.
func (rn *Runner) Snapshots(ctx context.Context, machine, name string) (string, rpc.VolumeSnapshots, error) {
	var out rpc.VolumeSnapshots
	if machine == "" {
		var err error
		if machine, err = rn.locateWriter(ctx, name); err != nil {
			return "", out, err
		}
	}
	err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.ListVolumeSnapshots, rpc.VolumeRequest{Name: name}, &out)
	return machine, out, err
}

// locateWriter is the Machine holding volume name's Writer, or its only
// copy; with Mirrors and no Writer (or two) it asks for --machine.
func (rn *Runner) locateWriter(ctx context.Context, name string) (string, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return "", err
	}
	if len(cp.Writers) == 1 {
		return cp.Writers[0], nil
	}
	held := slices.Sorted(maps.Keys(cp.Vols))
	switch {
	case len(held) == 1:
		return held[0], nil
	case len(held) == 0:
		return "", rpc.Errorf(rpc.CodeNotFound, "name: no Machine holds a volume %q%s", name, cp.Note).With("field", "name")
	}
	return "", rpc.Errorf(rpc.CodeAmbiguous, "name: volume %q has no single Writer and is on %s: pass --machine", name, strings.Join(held, ", ")).With("field", "name")
}

// KindSnapshotRestore is the Volume Run kind of `volume snapshot restore`.
const KindSnapshotRestore = "snapshot-restore"

// SnapshotRestoreOptions shape a snapshot restore.
type SnapshotRestoreOptions struct {
	// Machine, when set, is the Machine whose copy is meant: refused
	// unless it holds the Writer.
	Machine string
	// Stop stops the running Containers mounting the volume on the
	// Writer's Machine first and starts them again after.
	Stop bool
	// Force destroys the snapshots and bookmarks newer than the target.
	Force bool
	// Grace is how long each Container gets to stop.
	Grace time.Duration
}

// CheckSnapshotRestore refuses what no Machine would accept, naming the
// argument.
func CheckSnapshotRestore(name, snap string, o SnapshotRestoreOptions) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := volume.ValidSnapshot(snap); err != nil {
		return fmt.Errorf("SNAPSHOT: %w", err)
	}
	if o.Grace < 0 {
		return fmt.Errorf("--grace: must be at least 0, got %s", o.Grace)
	}
	return nil
}

// RestoreSnapshot is a snapshot-restore run: the Writer's copy of volume
// name goes back to its snapshot snap (every change since is lost). Its
// steps: check-writer, with Stop a stop of each running Container
// mounting the volume there, rollback, and a start of each Container
// stopped. It is refused before a run opens, changing nothing, when the
// volume has no Writer or two, o.Machine is not the Writer (a Mirror's
// copy is never rolled back), the snapshot is not there (naming it and
// those that are), newer snapshots would go without Force (naming them),
// or a running Container mounts it without Stop (naming it). A failed
// rollback starts the stopped Containers again: the run ends undone.
func (rn *Runner) RestoreSnapshot(ctx context.Context, name, snap string, o SnapshotRestoreOptions) (Result, error) {
	if err := CheckSnapshotRestore(name, snap, o); err != nil {
		return Result{}, err
	}
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if o.Machine != "" {
		if err := cp.writerOn(o.Machine); err != nil {
			return Result{}, err
		}
	}
	w, err := cp.Writer()
	if err != nil {
		return Result{}, err
	}
	wv := cp.Vols[w]
	if !slices.ContainsFunc(wv.Snapshots, func(s rpc.VolumeSnapshot) bool { return s.Name == snap }) {
		return Result{}, rpc.Errorf(rpc.CodeNotFound, "SNAPSHOT: the Writer of %s, on %s, has no snapshot %q (it has: %s); `ployz volume snapshot ls %s` lists them",
			name, w, snap, snapshotList(wv), name).With("field", "snapshot").With("snapshot", snap)
	}
	if newer := NewerThan(wv, snap); len(newer) > 0 && !o.Force {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--force: restoring %s to %q destroys what is newer on %s: %s; pass --force to destroy them (every change since %s is lost either way)",
			name, snap, w, strings.Join(newer, ", "), snap).With("field", "--force").With("newer", newer)
	}
	units, err := rn.releaseUnits(ctx, w, name)
	if err != nil {
		return Result{}, err
	}
	var running []releaseUnit
	for _, u := range units {
		if u.running {
			running = append(running, u)
		}
	}
	if len(running) > 0 && !o.Stop {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--stop: running Container %s on %s mounts %s: pass --stop to stop it, roll back and start it again",
			unitNames(running), w, name).With("field", "--stop")
	}
	return rn.runVolume(ctx, cp, KindSnapshotRestore, "", func(r *volumeRun) error {
		r.run.Source = w
		return r.restoreSnapshot(w, snap, running, o)
	})
}

func (r *volumeRun) restoreSnapshot(w, snap string, running []releaseUnit, o SnapshotRestoreOptions) error {
	if err := r.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	var stopped []stoppedContainer
	undo := func(err error) error {
		// A fresh context: a cancel that ended the run must not cancel
		// its undo.
		r.ctx = context.WithoutCancel(r.ctx)
		return errors.Join(err, r.undoStart(w, stopped, nil, "is not rolled back"))
	}
	for _, u := range running {
		if err := r.stop(w, u.name, u.id, o.Grace); err != nil {
			return undo(err)
		}
		stopped = append(stopped, stoppedContainer{id: u.id, name: u.name})
	}
	err := r.step("rollback", w, func(st *operator.RunStep) error {
		out, err := r.rollback(w, rpc.RollbackVolumeRequest{Volume: r.run.Volume, Gen: r.run.Gen, Snapshot: snap, DestroyNewer: o.Force})
		if err == nil {
			st.Detail = "to " + snap
			if len(out.Destroyed) > 0 {
				st.Detail += ", destroyed " + strings.Join(out.Destroyed, ", ")
			}
		}
		return err
	})
	if err != nil {
		return undo(err)
	}
	// Past the rollback nothing is undone: each Container is started
	// again on the restored data, and one that fails fails the run.
	var errs []error
	for _, u := range stopped {
		errs = append(errs, r.step("start", w, func(st *operator.RunStep) error {
			st.Detail = u.name
			return r.start(w, u.name, u.id)
		}))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.note(w, fmt.Sprintf("restored: %s on %s is back at %s", r.run.Volume, w, snap))
	return nil
}

// rollback asks w for rollback_volume, saying every showEvery that it
// still waits, and gives up after the rollback bound with an error
// naming the Machine: the run then starts the stopped Containers again
// (their start waits on w until a rollback still in flight there ends).
func (r *volumeRun) rollback(w string, req rpc.RollbackVolumeRequest) (rpc.VolumeRolledBack, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.waits.rollback)
	defer cancel()
	type answer struct {
		out rpc.VolumeRolledBack
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.err = rpc.InvokeInto(ctx, r.Entry, rpc.Target{One: w}, rpc.RollbackVolume, req, &a.out)
		done <- a
	}()
	start := time.Now()
	tick := time.NewTicker(r.waits.showEvery)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			if a.err != nil && r.ctx.Err() == nil && ctx.Err() != nil {
				return a.out, rpc.Errorf(rpc.CodeUnavailable, "rollback of %s to %s on %s: no answer after %s (the bound for a rollback): the Machine may still be rolling it back; `ployz volume snapshot ls %s --machine %s` shows where the volume is: %v",
					req.Volume, req.Snapshot, w, r.waits.rollback, req.Volume, w, a.err).With("machine", w)
			}
			return a.out, a.err
		case <-tick.C:
			r.progress(w, fmt.Sprintf("%s: rollback of %s to %s: waiting for its answer (%s, gives up after %s)",
				w, req.Volume, req.Snapshot, time.Since(start).Round(time.Second), r.waits.rollback))
		}
	}
}

// writerOn refuses machine unless it holds the Writer of cp's volume.
func (cp Copies) writerOn(machine string) error {
	v, err := cp.copyOn("--machine", machine)
	if err != nil {
		return err
	}
	if role := Role(v); role != volumecopy.Writer {
		e := rpc.Errorf(rpc.CodeFailedPrecond, "--machine: %s's copy of %s is %s, not the Writer: only the Writer's copy is restored to a snapshot (a Mirror takes the Writer's data at the next sync)",
			machine, cp.Name, role).With("field", "--machine")
		if v.Copy != nil {
			e = e.With("copy", *v.Copy)
		}
		return e
	}
	return nil
}

// NewerThan names what restoring v to snap destroys: the snapshots after
// it (v's are oldest first) and the bookmarks created after it
// ("#name"), as the plugin's Rollback answers them.
func NewerThan(v rpc.Volume, snap string) []string {
	var out []string
	var at int64
	found := false
	for _, s := range v.Snapshots {
		switch {
		case found:
			out = append(out, s.Name)
		case s.Name == snap:
			found, at = true, s.Created
		}
	}
	for _, b := range v.Bookmarks {
		if b.Created > at {
			out = append(out, "#"+b.Name)
		}
	}
	return out
}

func snapshotList(v rpc.Volume) string {
	if len(v.Snapshots) == 0 {
		return "none"
	}
	names := make([]string, 0, len(v.Snapshots))
	for _, s := range v.Snapshots {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

func unitNames(us []releaseUnit) string {
	names := make([]string, 0, len(us))
	for _, u := range us {
		names = append(names, u.name)
	}
	return strings.Join(names, ", ")
}
