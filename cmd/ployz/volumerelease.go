package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
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

// releaseOpts are the release command's flags.
type releaseOpts struct {
	force bool
	grace time.Duration
}

func volumeRelease() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "release NAME [--force]",
		Short: "Volume Run: the Writer steps down, leaving every copy of a volume a read-only Mirror",
		Long: `A Release run, for planned maintenance or decommissioning of the Writer's
Machine before a new Writer is chosen: snapshot the Writer and send each
Mirror the changes while the Service Containers mounting the volume keep
running; then the cut: stop those Containers, take a final snapshot and
send it to every Mirror; then demote the Writer to a Mirror (the point of
no return). The volume is left with no Writer and every copy identical
and read-only.

The Containers stay stopped: a Deploy of a Service mounting a volume
with no Writer is refused. ` + "`ployz volume restore NAME --from MACHINE`" + ` makes
one of the copies the Writer again (then deploy, or start the Containers).

Before the point of no return a failure is undone: the stopped
Containers are started and the Writer is unchanged. Running a release
again continues from what the disks show; with the Writer already
demoted there is nothing to do.

It is refused, changing nothing, when the volume has no Writer or two,
or a Machine does not answer (it may hold a copy that would be left
behind). With no Mirror the only copy would be left read-only with no
second copy: --force is then required.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if o.grace < 0 {
				return fmt.Errorf("--grace: must be at least 0, got %s", o.grace)
			}
			return withCopies(c, args[0], func(s session, cp copies) error { return releaseVolume(c, s, cp, o) })
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "release although the volume has no Mirror (its only copy becomes read-only)")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "how long each Container gets to stop at the cut")
	return cmd
}

// releaseVolume checks cp before a run opens (a refusal changes nothing)
// and releases its Writer.
func releaseVolume(c *cobra.Command, s session, cp copies, o releaseOpts) error {
	if len(cp.missing) > 0 {
		return rpc.Errorf(rpc.CodeUnavailable, "NAME: %s did not answer: a release leaves every copy of %s identical, and it may hold one; retry when it answers (or `ployz machine rm` it)",
			strings.Join(cp.missing, ", "), cp.name).With("field", "name").With("machines", cp.missing)
	}
	if len(cp.writers) == 0 && len(cp.mirrors) > 0 {
		if done, err := released(s, cp); err != nil || done != "" {
			if err != nil {
				return err
			}
			return nothingToDo(c, done, fmt.Sprintf("%s has no Writer (%s released it; Mirrors on %s): nothing to do; `ployz volume restore %s --from MACHINE` makes one the Writer",
				cp.name, done, strings.Join(cp.mirrors, ", "), cp.name))
		}
	}
	w, err := cp.writer()
	if err != nil {
		return err
	}
	if len(cp.mirrors) == 0 && !o.force {
		return rpc.Errorf(rpc.CodeFailedPrecond, "--force: volume %q has no Mirror: a release would leave its only copy, on %s, read-only with no second copy; `ployz volume mirror %s --to MACHINE` first, or pass --force",
			cp.name, w, cp.name).With("field", "--force")
	}
	units, err := releaseUnits(c, s, w, cp.name)
	if err != nil {
		return err
	}
	return runVolume(c, s, cp, "release", "", func(r *volumeRun) error {
		r.run.Source = w
		rl := &releaser{volumeRun: r, writer: w, mirrors: cp.mirrors, units: units, grace: o.grace}
		return rl.release(cp)
	})
}

// released names the Machine whose Writer this computer's last Release of
// cp's volume demoted, when it holds a Mirror now; "" when there is none.
func released(s session, cp copies) (string, error) {
	prev, ok, err := s.st.LastVolumeRun(s.ctx, cp.name, "release")
	if err != nil || !ok {
		return "", err
	}
	if slices.Contains(cp.mirrors, prev.Source) {
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
func releaseUnits(c *cobra.Command, s session, writer, name string) ([]releaseUnit, error) {
	var l rpc.ContainerList
	if err := s.ent.Call(c.Context(), rpc.Target{One: writer}, rpc.CmdListContainers, rpc.ListContainersRequest{}, &l); err != nil {
		return nil, fmt.Errorf("list Containers on %s: %w", writer, err)
	}
	var out []releaseUnit
	for _, o := range l.Containers {
		if mountsVolume(o.Spec, name) {
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

func (rl *releaser) release(cp copies) error {
	if err := rl.fence(rl.writer, volumecopy.Writer); err != nil {
		return err
	}
	for _, m := range rl.mirrors {
		if err := rl.fence(m, volumecopy.Mirror); err != nil {
			return err
		}
	}
	// The bulk send, while the Containers keep writing.
	snap, wv, err := rl.snapshot(rl.writer, cp.vols[rl.writer])
	if err != nil {
		return err
	}
	if err := rl.sendAll(wv, snap, cp.vols); err != nil {
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
	if err := rl.stop(); err != nil {
		return err
	}
	vols := map[string]rpc.Volume{}
	for _, m := range append([]string{rl.writer}, rl.mirrors...) {
		var v rpc.Volume
		if err := rl.s.ent.Call(rl.ctx, rpc.Target{One: m}, rpc.CmdInspectVolume, rpc.VolumeRequest{Name: rl.run.Volume}, &v); err != nil {
			return fmt.Errorf("inspect %s on %s: %w", rl.run.Volume, m, err)
		}
		vols[m] = v
	}
	wv := vols[rl.writer]
	final := "run-" + strconv.FormatUint(rl.run.Gen, 10) + "-cut"
	err := rl.step("snapshot-cut", rl.writer, func(st *operator.RunStep) error {
		if hasSnapshot(wv, final) != "" {
			st.Outcome, st.Detail = operator.StepSkipped, final+" is there"
			return nil
		}
		st.Detail = final
		return rl.s.ent.Call(rl.ctx, rpc.Target{One: rl.writer}, rpc.CmdSnapshotVolume, rpc.SnapshotVolumeRequest{Volume: rl.run.Volume, Snapshot: final}, &wv)
	})
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

// stop stops each running Container mounting the volume on the Writer.
func (rl *releaser) stop() error {
	for _, u := range rl.units {
		if !u.running {
			continue
		}
		err := rl.step("stop", rl.writer, func(st *operator.RunStep) error {
			st.Detail = u.name
			err := rl.volumeRun.stop(rl.writer, u.name, u.id, rl.grace)
			if err == nil {
				rl.run.Stopped = append(rl.run.Stopped, u.name)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// undo starts again the Containers the cut stopped; the Writer was never
// demoted, so it is unchanged.
func (rl *releaser) undo() error {
	if rl.demoted {
		return nil
	}
	// A fresh context: a Ctrl-C that cancelled the run must not cancel
	// its undo.
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
	fmt.Fprintf(rl.errw, "  released: %s has no Writer; its copies on %s are identical read-only Mirrors\n", rl.run.Volume, strings.Join(copies, ", "))
	if len(rl.run.Stopped) > 0 {
		fmt.Fprintf(rl.errw, "  Containers %s stay stopped on %s (a Deploy mounting %s is refused while it has no Writer)\n",
			strings.Join(rl.run.Stopped, ", "), rl.writer, rl.run.Volume)
	}
	fmt.Fprintf(rl.errw, "  resume with `ployz volume restore %s --from MACHINE` (one of %s)\n", rl.run.Volume, strings.Join(copies, ", "))
}
