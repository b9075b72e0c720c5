package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/volume"
)

// Volume Runs (the design): the CLI is the operator. A run is a fixed list
// of steps, each admitted by the Machine it touches against its own copy
// (set_volume_copy's expected copy and floor); the operator store keeps
// one open run per Volume, numbered by its gen. Streams go Machine to
// Machine (send_volume_to into the target's volume transport, port 7574)
// where both serve it, else through this CLI (volumexfer.go).

// copies is what every Machine answered about one volume, read live.
type copies struct {
	name    string
	writers []string
	mirrors []string
	vols    map[string]rpc.Volume // by Machine
	pools   map[string]bool       // Machines with a ZFS pool
	missing []string              // Machines that did not answer
	note    string                // unanswered(): who did not answer, and why
}

func readCopies(c *cobra.Command, s session, name string) (copies, error) {
	ms, err := listVolumes(c, s, rpc.Target{All: true})
	if err != nil {
		return copies{}, err
	}
	cp := copies{name: name, vols: map[string]rpc.Volume{}, pools: map[string]bool{}, note: unanswered(ms)}
	for _, m := range ms {
		if m.List == nil {
			cp.missing = append(cp.missing, m.Machine)
			continue
		}
		cp.pools[m.Machine] = m.List.Pool != ""
		for _, v := range m.List.Volumes {
			if v.Name != name {
				continue
			}
			cp.vols[m.Machine] = v
			switch copyRole(v) {
			case volumecopy.Writer:
				cp.writers = append(cp.writers, m.Machine)
			case volumecopy.Mirror:
				cp.mirrors = append(cp.mirrors, m.Machine)
			}
		}
	}
	return cp, nil
}

// writer is the one Writer, or why a run cannot start.
func (cp copies) writer() (string, error) {
	switch len(cp.writers) {
	case 1:
		return cp.writers[0], nil
	case 0:
		held := ""
		for m, v := range cp.vols {
			held += fmt.Sprintf(" %s (%s)", m, copyRole(v))
		}
		if held == "" {
			return "", rpc.Errorf(rpc.CodeNotFound, "NAME: no Machine holds a volume %q%s", cp.name, cp.missingNote()).With("field", "name")
		}
		return "", rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has no Writer (held by%s)%s", cp.name, held, cp.missingNote()).With("field", "name")
	}
	return "", rpc.Errorf(rpc.CodeConflict, "NAME: volume %q has two Writers, %s: a run refuses to choose; `ployz volume restore %s --from MACHINE` (the newer epoch) demotes the other to a Mirror, losing its writes since",
		cp.name, cp.writerList(), cp.name).With("field", "name").With("writers", cp.writers)
}

// floor is the highest floor any Machine reported for the volume.
func (cp copies) floor() uint64 {
	var f uint64
	for _, v := range cp.vols {
		if v.Copy != nil {
			f = max(f, v.Copy.Floor)
		}
	}
	return f
}

// missingNote names the Machines that did not answer, and why.
func (cp copies) missingNote() string { return cp.note }

// withWriter checks NAME, reads every Machine's copy of it live and
// finds its one Writer, then calls fn: a refusal here opens no run.
func withWriter(c *cobra.Command, name string, fn func(s session, cp copies, writer string) error) error {
	return withCopies(c, name, func(s session, cp copies) error {
		w, err := cp.writer()
		if err != nil {
			return err
		}
		return fn(s, cp, w)
	})
}

// withCopies checks NAME and reads every Machine's copy of it live.
func withCopies(c *cobra.Command, name string, fn func(s session, cp copies) error) error {
	if err := volume.ValidName(name); err != nil {
		return fmt.Errorf("NAME: %w", err)
	}
	return withSession(c, func(s session) error {
		cp, err := readCopies(c, s, name)
		if err != nil {
			return err
		}
		return fn(s, cp)
	})
}

// runVolume opens a run of kind on cp's volume, drives it with fn and
// ends it.
func runVolume(c *cobra.Command, s session, cp copies, kind, target string, fn func(r *volumeRun) error) error {
	r, stop, err := beginRun(c, s, cp, kind, target)
	if err != nil {
		return err
	}
	defer stop()
	return r.finish(fn(r))
}

// volumeRun drives one run and records each step's outcome.
type volumeRun struct {
	c    *cobra.Command
	s    session
	ctx  context.Context
	run  operator.VolumeRun
	errw io.Writer
	// tasks holds the Machines known to serve volume_task, asked once a
	// run rather than before every Container step.
	tasks map[string]bool
}

// beginRun opens the run with a gen above every floor the copies showed:
// another operator computer's runs may have raised them past this
// store's gens (the two operators' runs can still collide, as any two
// operators driving one Volume can).
func beginRun(c *cobra.Command, s session, cp copies, kind, target string) (*volumeRun, func(), error) {
	name := cp.name
	r, err := s.st.BeginVolumeRunAbove(s.ctx, name, kind, target, cp.floor(), time.Now())
	var open *operator.RunOpenError
	if errors.As(err, &open) {
		return nil, nil, rpc.Errorf(rpc.CodeConflict, "%v: wait for it, or end its process", err).With("gen", open.Run.Gen)
	}
	if err != nil {
		return nil, nil, err
	}
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	fmt.Fprintf(c.ErrOrStderr(), "volume %s: %s run gen %d\n", name, kind, r.Gen)
	return &volumeRun{c: c, s: s, ctx: ctx, run: r, errw: c.ErrOrStderr()}, stop, nil
}

// step runs fn as one named step on machine and records its outcome:
// done (or what fn set), failed, or cancelled when the run was.
func (r *volumeRun) step(name, machine string, fn func(st *operator.RunStep) error) error {
	st := operator.RunStep{Name: name, Machine: machine}
	start := time.Now()
	err := fn(&st)
	st.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	switch {
	case err == nil && st.Outcome == "":
		st.Outcome = operator.RunDone
	case err != nil && r.ctx.Err() != nil:
		st.Outcome, st.Error = operator.RunCancelled, err.Error()
	case err != nil:
		st.Outcome, st.Error = operator.RunFailed, err.Error()
	}
	r.run.Steps = append(r.run.Steps, st)
	r.save()
	line := fmt.Sprintf("  %-14s %-8s %s", name, machine, st.Outcome)
	if st.Detail != "" {
		line += ": " + st.Detail
	}
	if st.Error != "" {
		line += ": " + st.Error
	}
	fmt.Fprintln(r.errw, line)
	return err
}

func (r *volumeRun) save() {
	r.run.Updated = time.Now()
	if err := r.s.st.SaveVolumeRun(r.run); err != nil {
		fmt.Fprintf(r.errw, "warning: volume run record not saved: %v\n", err)
	}
}

// finish ends the run by err (done, failed or cancelled) and prints it.
func (r *volumeRun) finish(err error) error {
	switch {
	case err == nil:
		r.run.State = operator.RunDone
	case r.run.State == operator.RunUndone:
		r.run.Error = err.Error()
	case r.ctx.Err() != nil:
		r.run.State, r.run.Error = operator.RunCancelled, err.Error()
	default:
		r.run.State, r.run.Error = operator.RunFailed, err.Error()
	}
	r.save()
	if g.json {
		if perr := printJSON(r.c.OutOrStdout(), map[string]any{"run": r.run}); perr != nil && err == nil {
			return perr
		}
	} else {
		fmt.Fprintf(r.c.OutOrStdout(), "volume %s: %s run gen %d %s\n", r.run.Volume, r.run.Kind, r.run.Gen, r.run.State)
	}
	return err
}

// setCopy is one set_volume_copy with this run's gen.
func (r *volumeRun) setCopy(machine, expect, want string) (rpc.VolumeCopySet, error) {
	var out rpc.VolumeCopySet
	err := r.s.ent.Call(r.ctx, rpc.Target{One: machine}, rpc.CmdSetVolumeCopy,
		rpc.SetVolumeCopyRequest{Volume: r.run.Volume, Gen: r.run.Gen, Expect: expect, Want: want}, &out)
	return out, err
}

// fence is a step reading machine's copy live and raising its floor to
// this run's gen: the copy must already be role (expect = want = role).
func (r *volumeRun) fence(machine, role string) error {
	return r.step("check-"+role, machine, func(st *operator.RunStep) error {
		out, err := r.setCopy(machine, role, role)
		if err == nil {
			st.Detail = fmt.Sprintf("%s, floor gen %d", out.Copy.Role, out.Copy.Floor)
		}
		return err
	})
}

// transition is a step moving machine's copy from expect to want; its
// detail is the copy's role after, or what detail makes of the answer.
func (r *volumeRun) transition(name, machine, expect, want string, detail func(rpc.VolumeCopySet) string) error {
	return r.step(name, machine, func(st *operator.RunStep) error {
		out, err := r.setCopy(machine, expect, want)
		if err == nil {
			st.Detail = out.Copy.Role
			if detail != nil {
				st.Detail = detail(out)
			}
		}
		return err
	})
}

// snapshot takes this run's snapshot on the Writer (kept when a retry
// finds it there) and answers the Writer's volume after it.
func (r *volumeRun) snapshot(writer string, wv rpc.Volume) (string, rpc.Volume, error) {
	snap := "run-" + strconv.FormatUint(r.run.Gen, 10)
	err := r.step("snapshot", writer, func(st *operator.RunStep) error {
		if hasSnapshot(wv, snap) != "" {
			st.Outcome, st.Detail = operator.StepSkipped, snap+" is there"
			return nil
		}
		st.Detail = snap
		return r.s.ent.Call(r.ctx, rpc.Target{One: writer}, rpc.CmdSnapshotVolume, rpc.SnapshotVolumeRequest{Volume: r.run.Volume, Snapshot: snap}, &wv)
	})
	return snap, wv, err
}

// hasSnapshot is the GUID of v's snapshot named name, or "".
func hasSnapshot(v rpc.Volume, name string) string {
	for _, s := range v.Snapshots {
		if s.Name == name {
			return s.GUID
		}
	}
	return ""
}

// maxTransfers bounds the streams one send step starts (the first and
// the rests of cut ones).
const maxTransfers = 3

// transfer brings target's copy to the Writer's snapshot snap, continuing
// from what target's disk shows: nothing (a full stream), a resume token
// (the rest of a cut transfer), or the newest snapshot both hold (an
// incremental stream). It answers target's volume after.
func (r *volumeRun) transfer(writer string, wv rpc.Volume, snap, target string, tv *rpc.Volume) error {
	return r.step("send", target, func(st *operator.RunStep) error {
		guid := hasSnapshot(wv, snap)
		// Each round first reads what the last transfer left, so the last
		// allowed transfer's success is seen.
		for round := 0; ; round++ {
			if tv != nil && slices.ContainsFunc(tv.Snapshots, func(s rpc.VolumeSnapshot) bool { return s.GUID == guid }) {
				if round == 0 {
					st.Outcome, st.Detail = operator.StepSkipped, target+" holds "+snap
				}
				return nil
			}
			if round == maxTransfers {
				return fmt.Errorf("%s does not hold %s after %d transfers", target, snap, maxTransfers)
			}
			req := rpc.SendVolumeRequest{Volume: r.run.Volume, Snapshot: snap}
			var what string
			switch {
			case tv != nil && tv.ResumeToken != "":
				req = rpc.SendVolumeRequest{Volume: r.run.Volume, ResumeToken: tv.ResumeToken}
				what = "the rest of a cut transfer"
			case tv != nil:
				base := commonBase(wv, *tv)
				if base == "" {
					return fmt.Errorf("%s holds %s with no snapshot in common with %s's: remove it there (`ployz volume rm %s --machine %s`) and mirror again",
						target, r.run.Volume, writer, r.run.Volume, target)
				}
				req.FromSnapshot = base
				what = "incremental " + base + " → " + snap
			default:
				what = "full " + snap
			}
			out, err := r.pump(writer, target, req, what)
			st.Bytes += out.bytes
			if st.Detail != "" {
				st.Detail += "; "
			}
			st.Detail += fmt.Sprintf("%s: %s", what, units.BytesSize(float64(out.bytes)))
			if out.direct {
				st.Detail += " direct"
			}
			if err != nil {
				if tv, err = r.resumeAfter(target, err); err != nil {
					return err
				}
				continue
			}
			tv = &out.got.Volume
		}
	})
}

// commonBase is the name of the newest snapshot of w that t holds too
// (equal GUIDs), else of w's newest bookmark whose snapshot t holds (a
// Mirror that missed runs the Writer has since pruned), or "". The send
// takes either name as its from_snapshot.
func commonBase(w, t rpc.Volume) string {
	held := func(g string) bool {
		return g != "" && slices.ContainsFunc(t.Snapshots, func(s rpc.VolumeSnapshot) bool { return s.GUID == g })
	}
	for i := len(w.Snapshots) - 1; i >= 0; i-- {
		if held(w.Snapshots[i].GUID) {
			return w.Snapshots[i].Name
		}
	}
	for i := len(w.Bookmarks) - 1; i >= 0; i-- {
		if held(w.Bookmarks[i].GUID) {
			return w.Bookmarks[i].Name
		}
	}
	return ""
}

// pump copies writer's stream for req into target's volume (resumable),
// Machine to Machine where both serve it, printing progress (bytes,
// rate, ETA) every second.
func (r *volumeRun) pump(writer, target string, req rpc.SendVolumeRequest, what string) (copied, error) {
	return volumeCopy{from: writer, to: target, req: req, resumable: true, what: what, errw: r.errw}.run(r.ctx, r.s)
}

// resumeAfter reads target's volume after a transfer failed: a resume
// token there means the stream was cut on the way and the next round
// sends only the rest. Anything else keeps the failure. After a cut
// (not a Machine's refusal) the target may still be ending its receive
// when the source's error arrives, so its token is waited for a while.
func (r *volumeRun) resumeAfter(target string, failed error) (*rpc.Volume, error) {
	wait := time.Duration(0)
	if cutLike(failed) {
		wait = tokenWait
	}
	for deadline := time.Now().Add(wait); r.ctx.Err() == nil; {
		var v rpc.Volume
		err := r.s.ent.Call(r.ctx, rpc.Target{One: target}, rpc.CmdInspectVolume, rpc.VolumeRequest{Name: r.run.Volume}, &v)
		if err == nil && v.ResumeToken != "" {
			fmt.Fprintf(r.errw, "    %s: cut on the way (%v); continuing from %s's resume token\n", target, failed, target)
			return &v, nil
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil, failed
}

// tokenWait is how long resumeAfter waits for a cut receive's token.
var tokenWait = 20 * time.Second

// cutLike reports whether err is a stream broken on the way rather than
// a Machine refusing it (a refusal leaves no token to wait for).
func cutLike(err error) bool {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return true
	}
	return re.Code == rpc.CodeUnavailable || re.Code == rpc.CodeInternal
}

func volumeMirror() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "mirror NAME --to MACHINE",
		Short: "Volume Run: give a volume a Mirror on another Machine (a full send from the Writer)",
		Long: `A Mirror run: snapshot the Writer (run-<gen>), send it in full to --to
Machine to Machine (through this CLI where either Machine is older), then
make --to's copy a Mirror. Each step is admitted by the Machine it
touches against its own copy; a retry continues from what --to's disk
shows (a resume token, or the snapshot already there).
One run per Volume at a time, recorded in the operator store
(` + "`ployz volume runs`" + `).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to: required (the Machine that gets the Mirror)")
			}
			return withWriter(c, args[0], func(s session, cp copies, w string) error {
				target, err := volumeTarget(cp, w, to, volumecopy.None)
				if err != nil {
					return err
				}
				return runVolume(c, s, cp, "mirror", target, func(r *volumeRun) error { return r.mirror(cp, w, target) })
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the Machine that gets the Mirror (name or id; it needs a ZFS pool)")
	return cmd
}

// volumeTarget checks --to before a run opens: another Machine that
// answered, has a ZFS pool and holds the volume with one of the roles
// (none: not at all, or with no role). Nothing changes on a refusal.
func volumeTarget(cp copies, writer, to string, roles ...string) (string, error) {
	has, answered := cp.pools[to]
	switch {
	case to == writer:
		return "", rpc.InvalidField("--to", "%s holds the Writer of %s", to, cp.name)
	case !answered && slices.Contains(cp.missing, to):
		return "", rpc.Errorf(rpc.CodeUnavailable, "--to: %s did not answer", to).With("field", "--to")
	case !answered:
		return "", rpc.Errorf(rpc.CodeNotFound, "--to: no Machine %q answered (`ployz machine ls`)", to).With("field", "--to")
	case !has:
		return "", rpc.Errorf(rpc.CodeFailedPrecond, "--to: Machine %s has no ZFS pool: set one with `ployz machine update %s --zfs-pool NAME`", to, to).
			With("field", "--to").With("label", volume.PoolLabel)
	}
	if v, ok := cp.vols[to]; ok && !slices.Contains(roles, copyRole(v)) {
		return "", rpc.Errorf(rpc.CodeConflict, "--to: %s already holds %s as its %s: `ployz volume sync %s` refreshes a Mirror", to, cp.name, copyRole(v), cp.name).With("field", "--to")
	}
	return to, nil
}

func (r *volumeRun) mirror(cp copies, w, target string) error {
	if err := r.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	// The target has no role yet: none → none raises its floor, so an
	// older run's late declare is refused from here on.
	if err := r.fence(target, volumecopy.None); err != nil {
		return err
	}
	snap, wv, err := r.snapshot(w, cp.vols[w])
	if err != nil {
		return err
	}
	var tv *rpc.Volume
	if v, ok := cp.vols[target]; ok {
		tv = &v
	}
	if err := r.transfer(w, wv, snap, target, tv); err != nil {
		return err
	}
	return r.transition("declare-mirror", target, volumecopy.None, volumecopy.Mirror, func(out rpc.VolumeCopySet) string {
		return fmt.Sprintf("%s at %s", out.Copy.Role, snap)
	})
}

func volumeSync() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync NAME",
		Short: "Volume Run: refresh every Mirror of a volume (an incremental send from the Writer)",
		Long: `A Sync run: snapshot the Writer (run-<gen>) and send each Mirror the
changes since the newest snapshot both hold, Machine to Machine. A Mirror
that fails does not stop the others; the run fails if any did.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withWriter(c, args[0], func(s session, cp copies, w string) error {
				if len(cp.mirrors) == 0 {
					return rpc.Errorf(rpc.CodeFailedPrecond, "NAME: volume %q has no Mirror%s: `ployz volume mirror %s --to MACHINE` makes one", cp.name, cp.missingNote(), cp.name).With("field", "name")
				}
				return runVolume(c, s, cp, "sync", "", func(r *volumeRun) error { return r.sync(cp, w) })
			})
		},
	}
	return cmd
}

func (r *volumeRun) sync(cp copies, w string) error {
	if err := r.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	var ok []string
	var failed []error
	for _, m := range cp.mirrors {
		if err := r.fence(m, volumecopy.Mirror); err != nil {
			failed = append(failed, err)
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		return errors.Join(failed...)
	}
	snap, wv, err := r.snapshot(w, cp.vols[w])
	if err != nil {
		return err
	}
	for _, m := range ok {
		if r.ctx.Err() != nil {
			return r.ctx.Err()
		}
		v := cp.vols[m]
		if err := r.transfer(w, wv, snap, m, &v); err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", m, err))
		}
	}
	return errors.Join(failed...)
}

func volumeSetCopy() *cobra.Command {
	var machine, expect, want string
	var gen uint64
	cmd := &cobra.Command{
		Use:   "set-copy NAME --machine M --gen N --expect ROLE --want ROLE",
		Short: "Plumbing: one set_volume_copy request (a Volume Run's step) to one Machine",
		Long: `Send one set_volume_copy to --machine: move its copy of NAME from --expect
to --want (none, writer or mirror) for the run numbered --gen. The Machine
applies its transition table: a copy already at --want answers success, a
copy at neither or a --gen below its floor is refused. Volume Runs send
these themselves; this is for repair and tests.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := volume.ValidName(args[0]); err != nil {
				return fmt.Errorf("NAME: %w", err)
			}
			if machine == "" {
				return errors.New("--machine: required")
			}
			for flag, v := range map[string]string{"--expect": expect, "--want": want} {
				if !volumecopy.ValidRole(v) {
					return fmt.Errorf("%s: %q is not a copy role (none, writer or mirror)", flag, v)
				}
			}
			if gen == 0 {
				return errors.New("--gen: required (1 or more)")
			}
			return withSession(c, func(s session) error {
				var out rpc.VolumeCopySet
				if err := s.ent.Call(c.Context(), rpc.Target{One: machine}, rpc.CmdSetVolumeCopy,
					rpc.SetVolumeCopyRequest{Volume: args[0], Gen: gen, Expect: expect, Want: want}, &out); err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "set": out})
				}
				fmt.Fprintf(c.OutOrStdout(), "%s's copy of %s: %s (floor gen %d, changed %v)\n", machine, args[0], out.Copy.Role, out.Copy.Floor, out.Changed)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine (name or id)")
	cmd.Flags().Uint64Var(&gen, "gen", 0, "the Volume Run's gen")
	cmd.Flags().StringVar(&expect, "expect", "", "the copy the Machine should have now")
	cmd.Flags().StringVar(&want, "want", "", "the copy it should have after")
	return cmd
}

func volumeRunsCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "runs [NAME]",
		Short: "List the Volume Runs this computer drove (the operator store), newest first",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			return withCurrentContext(func(st *operator.Store, ctxName string) error {
				runs, err := st.VolumeRuns(ctxName, name, limit)
				if err != nil {
					return err
				}
				if g.json {
					if runs == nil {
						runs = []operator.VolumeRun{}
					}
					return printJSON(c.OutOrStdout(), map[string]any{"runs": runs})
				}
				tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VOLUME\tGEN\tKIND\tTARGET\tSTATE\tSTARTED\tSTEPS")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", r.Volume, r.Gen, r.Kind, r.Target, r.State, r.Started.Local().Format(time.DateTime), len(r.Steps))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many")
	return cmd
}

// stoppedContainer is a Container a run stopped at its cut.
type stoppedContainer struct{ id, name string }

// undoStart ends an undo: after its earlier step's error (if any), it
// starts again each Container the run stopped on writer, and marks the
// run undone only when all went well; said is what writer is now.
func (r *volumeRun) undoStart(writer string, stopped []stoppedContainer, err error, said string) error {
	errs := []error{err}
	for _, u := range stopped {
		errs = append(errs, r.step("undo-start", writer, func(st *operator.RunStep) error {
			st.Detail = u.name
			return r.start(writer, u.name, u.id)
		}))
	}
	if e := errors.Join(errs...); e != nil {
		return fmt.Errorf("undo: %w", e)
	}
	r.run.State = operator.RunUndone
	fmt.Fprintf(r.errw, "  undone: %s %s and its Containers run\n", writer, said)
	return nil
}
