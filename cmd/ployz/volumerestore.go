package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// Delete-mirror and Restore runs (design: Volume Runs, Volume handover:
// "If the source is gone for good, server rm it and then volume restore
// --from the target"). Neither sends data: each changes copies only.

// copyOn is Machine m's copy of cp's volume, or why a run cannot use it:
// m did not answer, or holds no such volume.
func (cp copies) copyOn(flag, m string) (rpc.Volume, error) {
	if v, ok := cp.vols[m]; ok {
		return v, nil
	}
	if slices.Contains(cp.missing, m) {
		return rpc.Volume{}, rpc.Errorf(rpc.CodeUnavailable, "%s: %s did not answer", flag, m).With("field", flag)
	}
	if _, answered := cp.pools[m]; !answered {
		return rpc.Volume{}, rpc.Errorf(rpc.CodeNotFound, "%s: no Machine %q answered (`ployz machine ls`)", flag, m).With("field", flag)
	}
	return rpc.Volume{}, rpc.Errorf(rpc.CodeNotFound, "%s: %s holds no volume %q", flag, m, cp.name).With("field", flag)
}

// mounting names the Containers on machine that bind-mount volume name,
// only the running ones when running is set.
func mounting(c *cobra.Command, s session, machine, name string, running bool) ([]string, error) {
	var l rpc.ContainerList
	if err := s.ent.Call(c.Context(), rpc.Target{One: machine}, rpc.CmdListContainers, rpc.ListContainersRequest{}, &l); err != nil {
		return nil, fmt.Errorf("list Containers on %s: %w", machine, err)
	}
	var out []string
	for _, o := range l.Containers {
		if mountsVolume(o.Spec, name) && (!running || o.State == "running" || o.State == "restarting") {
			out = append(out, o.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

func volumeDeleteMirror() *cobra.Command {
	var on string
	cmd := &cobra.Command{
		Use:   "delete-mirror NAME --on MACHINE",
		Short: "Volume Run: delete a volume's Mirror on a Machine (its dataset too)",
		Long: `A Delete-mirror run: check that --on's copy of NAME is a Mirror, make it
none, then remove its dataset there. Refused before a run opens when
--on holds the Writer, or any Container on --on mounts the volume.
Nothing on the Writer changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if on == "" {
				return errors.New("--on: required (the Machine whose Mirror goes)")
			}
			return withCopies(c, args[0], func(s session, cp copies) error { return deleteMirror(c, s, cp, on) })
		},
	}
	cmd.Flags().StringVar(&on, "on", "", "the Machine holding the Mirror (name)")
	return cmd
}

func deleteMirror(c *cobra.Command, s session, cp copies, on string) error {
	if err := cp.oneWriterAtMost(); err != nil {
		return err
	}
	v, err := cp.copyOn("--on", on)
	if err != nil {
		return err
	}
	switch role := copyRole(v); role {
	case volumecopy.Mirror:
	case volumecopy.Writer:
		return rpc.Errorf(rpc.CodeFailedPrecond, "--on: %s holds the Writer of %s (epoch %d), not a Mirror: a Writer is never deleted this way (`ployz volume move %s --to MACHINE` first)",
			on, cp.name, epochOf(v), cp.name).With("field", "--on").With("copy", *v.Copy)
	default:
		return rpc.Errorf(rpc.CodeFailedPrecond, "--on: %s's copy of %s is %s, not a Mirror (`ployz volume rm %s --machine %s` removes a volume with no role)",
			on, cp.name, role, cp.name, on).With("field", "--on")
	}
	users, err := mounting(c, s, on, cp.name, false)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return rpc.Errorf(rpc.CodeFailedPrecond, "--on: Container %s on %s mounts %s: remove it first", strings.Join(users, ", "), on, cp.name).With("field", "--on")
	}
	return runVolume(c, s, cp, "delete-mirror", on, func(r *volumeRun) error {
		if err := r.fence(on, volumecopy.Mirror); err != nil {
			return err
		}
		if err := r.transition("forget-mirror", on, volumecopy.Mirror, volumecopy.None, nil); err != nil {
			return err
		}
		return r.step("remove", on, func(st *operator.RunStep) error {
			st.Detail = "dataset of " + cp.name
			err := r.s.ent.Call(r.ctx, rpc.Target{One: on}, rpc.CmdRemoveVolume, rpc.VolumeRequest{Name: cp.name}, nil)
			var re *rpc.Error
			if errors.As(err, &re) && re.Code == rpc.CodeNotFound {
				st.Outcome, st.Detail = operator.StepSkipped, "no dataset of "+cp.name+" left"
				return nil
			}
			return err
		})
	})
}

// oneWriterAtMost refuses a volume two Machines answer Writer for.
func (cp copies) oneWriterAtMost() error {
	if len(cp.writers) > 1 {
		_, err := cp.writer()
		return err
	}
	return nil
}

func volumeRestore() *cobra.Command {
	var from string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore NAME --from MACHINE [--force]",
		Short: "Volume Run: make a Mirror the Writer when the Writer is gone, or demote an older second Writer",
		Long: `A Restore run, for a Writer that is gone: when no Machine answers as
NAME's Writer (its Machine left the Cluster, ` + "`ployz machine rm`" + `, or a
` + "`ployz volume release`" + ` demoted it), --from's Mirror becomes the Writer with a
new epoch. Writes on the old Writer
after --from's last sync are not on it. A Machine that did not answer
may still hold the Writer: --force is then required. A Machine that
answers as the Writer is never replaced (` + "`ployz volume move`" + ` hands it over).

When two Machines answer as Writer (the old one came back after a
restore), every run refuses; restore --from the one with the newer
epoch demotes the other to a Mirror: its writes since are lost. It is
refused while a running Container mounts the old copy: stop it first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from: required (the Machine whose copy becomes, or stays, the Writer)")
			}
			return withCopies(c, args[0], func(s session, cp copies) error { return restoreVolume(c, s, cp, from, force) })
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the Machine whose Mirror becomes the Writer, or the newer of two Writers (name)")
	cmd.Flags().BoolVar(&force, "force", false, "promote although a Machine that may hold the Writer did not answer")
	return cmd
}

func restoreVolume(c *cobra.Command, s session, cp copies, from string, force bool) error {
	v, err := cp.copyOn("--from", from)
	if err != nil {
		return err
	}
	role := copyRole(v)
	switch {
	case len(cp.writers) > 1:
		return demoteOlder(c, s, cp, from)
	case role == volumecopy.Writer:
		return nothingToDo(c, from, fmt.Sprintf("%s already is the only Writer of %s (epoch %d): nothing to do", from, cp.name, epochOf(v)))
	case role != volumecopy.Mirror:
		return rpc.Errorf(rpc.CodeFailedPrecond, "--from: %s's copy of %s is %s: only a Mirror becomes the Writer", from, cp.name, role).With("field", "--from")
	case len(cp.writers) == 1:
		return rpc.Errorf(rpc.CodeFailedPrecond, "--from: %s answers as the Writer of %s: restore replaces only a Writer that is gone (`ployz volume move %s --to %s` hands it over)",
			cp.writers[0], cp.name, cp.name, from).With("field", "--from").With("writer", cp.writers[0])
	case len(cp.missing) > 0 && !force:
		return rpc.Errorf(rpc.CodeFailedPrecond, "--force: %s did not answer and may hold the Writer of %s: if it is gone for good, `ployz machine rm` it; else pass --force (its writes would be lost when it returns, as a second Writer with an older epoch)",
			strings.Join(cp.missing, ", "), cp.name).With("field", "--force")
	}
	return runVolume(c, s, cp, "restore", from, func(r *volumeRun) error {
		if err := r.fence(from, volumecopy.Mirror); err != nil {
			return err
		}
		err := r.transition("promote", from, volumecopy.Mirror, volumecopy.Writer, func(out rpc.VolumeCopySet) string {
			return fmt.Sprintf("%s, epoch %d", out.Copy.Role, out.Copy.Epoch)
		})
		if err == nil {
			fmt.Fprintf(r.errw, "  %s is the Writer of %s: writes on the old Writer after %s's last sync are not on it\n", from, cp.name, from)
		}
		return err
	})
}

// demoteOlder ends two Writers (design: the older writer epoch): from
// must be the newer; the other becomes a Mirror and its writes since the
// newer epoch began are lost.
func demoteOlder(c *cobra.Command, s session, cp copies, from string) error {
	if len(cp.writers) != 2 {
		return rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has %d Writers (%s): demote them one at a time with `ployz volume set-copy`",
			cp.name, len(cp.writers), cp.writerList()).With("field", "name")
	}
	newer, older := cp.writers[0], cp.writers[1]
	if epochOf(cp.vols[older]) > epochOf(cp.vols[newer]) {
		newer, older = older, newer
	}
	if from != newer {
		return rpc.Errorf(rpc.CodeFailedPrecond, "--from: volume %q has two Writers, %s: --from %s, the newer epoch, keeps its Writer and demotes %s",
			cp.name, cp.writerList(), newer, older).With("field", "--from")
	}
	users, err := mounting(c, s, older, cp.name, true)
	if err != nil {
		return err
	}
	if len(users) > 0 {
		return rpc.Errorf(rpc.CodeFailedPrecond, "NAME: running Container %s on %s mounts the older Writer of %s: stop it first (its writes since epoch %d are lost either way)",
			strings.Join(users, ", "), older, cp.name, epochOf(cp.vols[newer])).With("field", "name").With("machine", older)
	}
	return runVolume(c, s, cp, "restore", from, func(r *volumeRun) error {
		if err := r.fence(from, volumecopy.Writer); err != nil {
			return err
		}
		err := r.transition("demote-writer", older, volumecopy.Writer, volumecopy.Mirror, func(out rpc.VolumeCopySet) string {
			return fmt.Sprintf("%s: its writes since %s's epoch %d are lost", out.Copy.Role, from, epochOf(cp.vols[newer]))
		})
		if err == nil {
			fmt.Fprintf(r.errw, "  %s keeps the Writer of %s; %s's copy is a Mirror (its writes since are lost): `ployz volume delete-mirror %s --on %s` then `ployz volume mirror %s --to %s` makes it level again\n",
				from, cp.name, older, cp.name, older, cp.name, older)
		}
		return err
	})
}

// epochOf is v's Writer epoch (0 for a copy that reports none).
func epochOf(v rpc.Volume) int64 {
	if v.Copy == nil {
		return 0
	}
	return v.Copy.Epoch
}

// writerList names each Writer with its epoch.
func (cp copies) writerList() string {
	var out []string
	for _, w := range cp.writers {
		out = append(out, fmt.Sprintf("%s (epoch %d)", w, epochOf(cp.vols[w])))
	}
	return strings.Join(out, " and ")
}

// nothingToDo says a command found the copies as asked and ran nothing.
func nothingToDo(c *cobra.Command, machine, msg string) error {
	if g.json {
		return printJSON(c.OutOrStdout(), map[string]any{"run": nil, "writer": machine, "message": msg})
	}
	fmt.Fprintln(c.OutOrStdout(), msg)
	return nil
}
