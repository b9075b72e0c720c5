package volumerun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// A Release run has the Writer step down: the Volume is left with no
// Writer and every copy identical and read-only, for planned maintenance
// or decommissioning of the Writer's Machine before a new Writer is
// chosen. A bulk send to every Mirror while the Containers keep writing,
// then the cut (stop them, a final snapshot and send), then the Writer is
// demoted to a Mirror: the point of no return. A failure before it is
// undone: the Containers run again and the Writer is unchanged.

// ReleaseOptions shape a Release.
type ReleaseOptions struct {
	// Force releases a volume with no Mirror: its only copy is left
	// read-only with no second copy. The caller confirms that.
	Force bool
	// Grace is how long each Container gets to stop at the cut.
	Grace time.Duration
}

// Release releases volume name's Writer; with the Writer a Release of
// this computer's demoted now a Mirror it answers Nothing. It is refused,
// changing nothing, when a Machine does not answer, the volume has no
// Writer or two, or (without Force) no Mirror.
func (rn *Runner) Release(ctx context.Context, name string, o ReleaseOptions) (Result, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if len(cp.Missing) > 0 {
		return Result{}, rpc.Errorf(rpc.CodeUnavailable, "NAME: %s did not answer: a release leaves every copy of %s identical, and it may hold one; retry when it answers (or `ployz machine rm` it)",
			strings.Join(cp.Missing, ", "), cp.Name).With("field", "name").With("machines", cp.Missing)
	}
	if len(cp.Writers) == 0 && len(cp.Mirrors) > 0 {
		if done, err := rn.released(ctx, cp); err != nil || done != "" {
			if err != nil {
				return Result{}, err
			}
			return nothing(done, fmt.Sprintf("%s has no Writer (%s released it; Mirrors on %s): nothing to do; `ployz volume restore %s --from MACHINE` makes one the Writer",
				cp.Name, done, strings.Join(cp.Mirrors, ", "), cp.Name))
		}
	}
	w, err := cp.Writer()
	if err != nil {
		return Result{}, err
	}
	if len(cp.Mirrors) == 0 && !o.Force {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--force: volume %q has no Mirror: a release would leave its only copy, on %s, read-only with no second copy; `ployz volume mirror %s --to MACHINE` first, or pass --force",
			cp.Name, w, cp.Name).With("field", "--force")
	}
	units, err := rn.releaseUnits(ctx, w, cp.Name)
	if err != nil {
		return Result{}, err
	}
	return rn.runVolume(ctx, cp, "release", "", func(r *volumeRun) error {
		r.run.Source = w
		rl := &releaser{volumeRun: r, writer: w, mirrors: cp.Mirrors, units: units, grace: o.Grace}
		return rl.release(cp)
	})
}

// released names the Machine whose Writer the last Release (any operator's) of
// cp's volume demoted, when it holds a Mirror now; "" when there is none.
func (rn *Runner) released(ctx context.Context, cp Copies) (string, error) {
	prev, ok, err := rn.LastRun(ctx, cp.Name, "release")
	if err != nil || !ok {
		return "", err
	}
	if slices.Contains(cp.Mirrors, prev.Source) {
		return prev.Source, nil
	}
	return "", nil
}

// releaseUnit is one Service Container on the Writer mounting the volume.
type releaseUnit struct {
	id, name string
	running  bool
}

// releaseUnits reads the Containers mounting name on the Writer.
func (rn *Runner) releaseUnits(ctx context.Context, writer, name string) ([]releaseUnit, error) {
	cs, err := rn.containers(ctx, writer)
	if err != nil {
		return nil, err
	}
	var out []releaseUnit
	for _, o := range cs {
		if MountsVolume(o.Spec, name) {
			out = append(out, releaseUnit{id: o.ID, name: o.Name, running: deploy.Running(o)})
		}
	}
	slices.SortFunc(out, func(a, b releaseUnit) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// releaser drives one Release run.
type releaser struct {
	*volumeRun
	writer  string
	mirrors []string
	units   []releaseUnit
	grace   time.Duration
	demoted bool // past the point of no return: no undo
}

func (rl *releaser) release(cp Copies) error {
	if err := rl.fence(rl.writer, volumecopy.Writer); err != nil {
		return err
	}
	for _, m := range rl.mirrors {
		if err := rl.fence(m, volumecopy.Mirror); err != nil {
			return err
		}
	}
	// The bulk send, while the Containers keep writing.
	snap, wv, err := rl.snapshot("snapshot", rl.writer, cp.Vols[rl.writer], "")
	if err != nil {
		return err
	}
	if err := rl.sendAll(wv, snap, cp.Vols); err != nil {
		return err
	}
	if err := rl.cut(); err != nil {
		return errors.Join(err, rl.undo())
	}
	rl.done()
	return nil
}

// sendAll brings every Mirror to the Writer's snapshot snap; vols are
// their copies as last read.
func (rl *releaser) sendAll(wv rpc.Volume, snap string, vols map[string]rpc.Volume) error {
	for _, m := range rl.mirrors {
		if rl.ctx.Err() != nil {
			return rl.ctx.Err()
		}
		v := vols[m]
		if err := rl.transfer(rl.writer, wv, snap, m, &v); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	return nil
}

// cut stops the Containers, sends every Mirror the last changes and
// demotes the Writer: after it returns nil there is no undo.
func (rl *releaser) cut() error {
	for _, u := range rl.units {
		if !u.running {
			continue
		}
		if err := rl.stop(rl.writer, u.name, u.id, rl.grace); err != nil {
			return err
		}
	}
	vols := map[string]rpc.Volume{}
	for _, m := range append([]string{rl.writer}, rl.mirrors...) {
		v, err := rl.inspect(m)
		if err != nil {
			return fmt.Errorf("inspect %s on %s: %w", rl.run.Volume, m, err)
		}
		vols[m] = v
	}
	final, wv, err := rl.snapshot("snapshot-cut", rl.writer, vols[rl.writer], "-cut")
	if err != nil {
		return err
	}
	if err := rl.sendAll(wv, final, vols); err != nil {
		return err
	}
	return rl.transition("demote-writer", rl.writer, volumecopy.Writer, volumecopy.Mirror, func(out rpc.VolumeCopySet) string {
		rl.demoted = true
		return fmt.Sprintf("%s at %s: the point of no return", out.Copy.Role, final)
	})
}

// undo starts again the Containers the cut stopped; the Writer was never
// demoted, so it is unchanged.
func (rl *releaser) undo() error {
	if rl.demoted {
		return nil
	}
	// A fresh context: a cancel that ended the run must not cancel its
	// undo.
	rl.ctx = context.WithoutCancel(rl.ctx)
	var stopped []stoppedContainer
	for _, u := range rl.units {
		if slices.Contains(rl.run.Stopped, u.name) {
			stopped = append(stopped, stoppedContainer{id: u.id, name: u.name})
		}
	}
	return rl.undoStart(rl.writer, stopped, nil, "is still the Writer of "+rl.run.Volume)
}

// done says where the volume is left and how to resume.
func (rl *releaser) done() {
	copies := append([]string{rl.writer}, rl.mirrors...)
	rl.note(rl.writer, fmt.Sprintf("released: %s has no Writer; its copies on %s are identical read-only Mirrors", rl.run.Volume, strings.Join(copies, ", ")))
	if len(rl.run.Stopped) > 0 {
		rl.note(rl.writer, fmt.Sprintf("Containers %s stay stopped on %s (a Deploy mounting %s is refused while it has no Writer)",
			strings.Join(rl.run.Stopped, ", "), rl.writer, rl.run.Volume))
	}
	rl.note(rl.writer, fmt.Sprintf("resume with `ployz volume restore %s --from MACHINE` (one of %s)", rl.run.Volume, strings.Join(copies, ", ")))
}
