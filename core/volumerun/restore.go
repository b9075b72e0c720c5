package volumerun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// Delete-mirror and Restore runs (design: Volume Runs, Volume handover:
// "If the source is gone for good, server rm it and then volume restore
// --from the target"). Neither sends data: each changes copies only.

// mounting names the Containers on machine that bind-mount volume name,
// only the running ones when running is set.
func (rn *Runner) mounting(ctx context.Context, machine, name string, running bool) ([]string, error) {
	cs, err := rn.containers(ctx, machine)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range cs {
		if MountsVolume(o.Spec, name) && (!running || o.State == "running" || o.State == "restarting") {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// DeleteMirror is a Delete-mirror run: check that on's copy of volume
// name is a Mirror, make it none, then remove its dataset there. Refused
// before a run opens when on holds the Writer, or a Container on on
// mounts the volume. Nothing on the Writer changes.
func (rn *Runner) DeleteMirror(ctx context.Context, name, on string) (Result, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if err := cp.oneWriterAtMost(); err != nil {
		return Result{}, err
	}
	v, err := cp.copyOn("--on", on)
	if err != nil {
		return Result{}, err
	}
	switch role := Role(v); role {
	case volumecopy.Mirror:
	case volumecopy.Writer:
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--on: %s holds the Writer of %s (epoch %d), not a Mirror: a Writer is never deleted this way (`ployz volume move %s --to MACHINE` first)",
			on, cp.Name, epochOf(v), cp.Name).With("field", "--on").With("copy", *v.Copy)
	default:
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--on: %s's copy of %s is %s, not a Mirror (`ployz volume rm %s --machine %s` removes a volume with no role)",
			on, cp.Name, role, cp.Name, on).With("field", "--on")
	}
	users, err := rn.mounting(ctx, on, cp.Name, false)
	if err != nil {
		return Result{}, err
	}
	if len(users) > 0 {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--on: Container %s on %s mounts %s: remove it first", strings.Join(users, ", "), on, cp.Name).With("field", "--on")
	}
	return rn.runVolume(ctx, cp, "delete-mirror", on, func(r *volumeRun) error {
		if err := r.fence(on, volumecopy.Mirror); err != nil {
			return err
		}
		if err := r.transition("forget-mirror", on, volumecopy.Mirror, volumecopy.None, nil); err != nil {
			return err
		}
		return r.step("remove", on, func(st *operator.RunStep) error {
			st.Detail = "dataset of " + cp.Name
			err := rpc.InvokeInto(r.ctx, r.Entry, rpc.Target{One: on}, rpc.RemoveVolume, rpc.VolumeRequest{Name: cp.Name}, nil)
			var re *rpc.Error
			if errors.As(err, &re) && re.Code == rpc.CodeNotFound {
				st.Outcome, st.Detail = operator.StepSkipped, "no dataset of "+cp.Name+" left"
				return nil
			}
			return err
		})
	})
}

// Restore is a Restore run: when no Machine answers as volume name's
// Writer, from's Mirror becomes the Writer with a new epoch (writes on
// the old Writer after from's last sync are lost); a Machine that did not
// answer may still hold the Writer, and then force is required. When two
// Machines answer as Writer, from must be the newer: the older is demoted
// to a Mirror and its writes since are lost.
func (rn *Runner) Restore(ctx context.Context, name, from string, force bool) (Result, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	v, err := cp.copyOn("--from", from)
	if err != nil {
		return Result{}, err
	}
	role := Role(v)
	switch {
	case len(cp.Writers) > 1:
		return rn.demoteOlder(ctx, cp, from)
	case role == volumecopy.Writer:
		return nothing(from, fmt.Sprintf("%s already is the only Writer of %s (epoch %d): nothing to do", from, cp.Name, epochOf(v)))
	case role != volumecopy.Mirror:
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--from: %s's copy of %s is %s: only a Mirror becomes the Writer", from, cp.Name, role).With("field", "--from")
	case len(cp.Writers) == 1:
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--from: %s answers as the Writer of %s: restore replaces only a Writer that is gone (`ployz volume move %s --to %s` hands it over)",
			cp.Writers[0], cp.Name, cp.Name, from).With("field", "--from").With("writer", cp.Writers[0])
	case len(cp.Missing) > 0 && !force:
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--force: %s did not answer and may hold the Writer of %s: if it is gone for good, `ployz machine rm` it; else pass --force (its writes would be lost when it returns, as a second Writer with an older epoch)",
			strings.Join(cp.Missing, ", "), cp.Name).With("field", "--force")
	}
	return rn.runVolume(ctx, cp, "restore", from, func(r *volumeRun) error {
		if err := r.fence(from, volumecopy.Mirror); err != nil {
			return err
		}
		err := r.transition("promote", from, volumecopy.Mirror, volumecopy.Writer, func(out rpc.VolumeCopySet) string {
			return fmt.Sprintf("%s, epoch %d", out.Copy.Role, out.Copy.Epoch)
		})
		if err == nil {
			r.note(from, fmt.Sprintf("%s is the Writer of %s: writes on the old Writer after %s's last sync are not on it", from, cp.Name, from))
		}
		return err
	})
}

// demoteOlder ends two Writers (design: the older writer epoch): from
// must be the newer; the other becomes a Mirror and its writes since the
// newer epoch began are lost.
func (rn *Runner) demoteOlder(ctx context.Context, cp Copies, from string) (Result, error) {
	if len(cp.Writers) != 2 {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has %d Writers (%s): demote them one at a time with `ployz volume set-copy`",
			cp.Name, len(cp.Writers), cp.writerList()).With("field", "name")
	}
	newer, older := cp.Writers[0], cp.Writers[1]
	if epochOf(cp.Vols[older]) > epochOf(cp.Vols[newer]) {
		newer, older = older, newer
	}
	if from != newer {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "--from: volume %q has two Writers, %s: --from %s, the newer epoch, keeps its Writer and demotes %s",
			cp.Name, cp.writerList(), newer, older).With("field", "--from")
	}
	users, err := rn.mounting(ctx, older, cp.Name, true)
	if err != nil {
		return Result{}, err
	}
	if len(users) > 0 {
		return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "NAME: running Container %s on %s mounts the older Writer of %s: stop it first (its writes since epoch %d are lost either way)",
			strings.Join(users, ", "), older, cp.Name, epochOf(cp.Vols[newer])).With("field", "name").With("machine", older)
	}
	return rn.runVolume(ctx, cp, "restore", from, func(r *volumeRun) error {
		if err := r.fence(from, volumecopy.Writer); err != nil {
			return err
		}
		err := r.transition("demote-writer", older, volumecopy.Writer, volumecopy.Mirror, func(out rpc.VolumeCopySet) string {
			return fmt.Sprintf("%s: its writes since %s's epoch %d are lost", out.Copy.Role, from, epochOf(cp.Vols[newer]))
		})
		if err == nil {
			r.note(from, fmt.Sprintf("%s keeps the Writer of %s; %s's copy is a Mirror (its writes since are lost): `ployz volume delete-mirror %s --on %s` then `ployz volume mirror %s --to %s` makes it level again",
				from, cp.Name, older, cp.Name, older, cp.Name, older))
		}
		return err
	})
}
