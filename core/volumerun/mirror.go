package volumerun

import (
	"context"
	"errors"
	"fmt"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// Mirror is a Mirror run: snapshot the Writer (run-<gen>), send it in
// full to Machine to, then make to's copy a Mirror. A retry continues
// from what to's disk shows (a resume token, or the snapshot there).
func (rn *Runner) Mirror(ctx context.Context, name, to string) (Result, error) {
	cp, w, err := rn.readWriter(ctx, name)
	if err != nil {
		return Result{}, err
	}
	target, err := cp.target(w, to, volumecopy.None)
	if err != nil {
		return Result{}, err
	}
	return rn.runVolume(ctx, cp, "mirror", target, func(r *volumeRun) error { return r.mirror(cp, w, target) })
}

func (r *volumeRun) mirror(cp Copies, w, target string) error {
	if err := r.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	// The target has no role yet: none → none raises its floor, so an
	// older run's late declare is refused from here on.
	if err := r.fence(target, volumecopy.None); err != nil {
		return err
	}
	snap, wv, err := r.snapshot("snapshot", w, cp.Vols[w], "")
	if err != nil {
		return err
	}
	var tv *rpc.Volume
	if v, ok := cp.Vols[target]; ok {
		tv = &v
	}
	if err := r.transfer(w, wv, snap, target, tv); err != nil {
		return err
	}
	return r.transition("declare-mirror", target, volumecopy.None, volumecopy.Mirror, func(out rpc.VolumeCopySet) string {
		return fmt.Sprintf("%s at %s", out.Copy.Role, snap)
	})
}

// Sync is a Sync run: snapshot the Writer and send each Mirror the
// changes since the newest snapshot both hold. A Mirror that fails does
// not stop the others; the run fails if any did.
func (rn *Runner) Sync(ctx context.Context, name string) (Result, error) {
	cp, w, err := rn.readWriter(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if len(cp.Mirrors) == 0 {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has no Mirror%s: `ployz volume mirror %s --to MACHINE` makes one", cp.Name, cp.Note, cp.Name).With("field", "name")
	}
	return rn.runVolume(ctx, cp, "sync", "", func(r *volumeRun) error { return r.sync(cp, w) })
}

func (r *volumeRun) sync(cp Copies, w string) error {
	if err := r.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	var ok []string
	var failed []error
	for _, m := range cp.Mirrors {
		if err := r.fence(m, volumecopy.Mirror); err != nil {
			failed = append(failed, err)
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		return errors.Join(failed...)
	}
	snap, wv, err := r.snapshot("snapshot", w, cp.Vols[w], "")
	if err != nil {
		return err
	}
	for _, m := range ok {
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		v := cp.Vols[m]
		if err := r.transfer(w, wv, snap, m, &v); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", m, err))
		}
	}
	return errors.Join(failed...)
}
