package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/volume"
)

// A Move run (design: Volume handover) hands a Provisioned Volume and
// the Service Containers mounting it from the Writer's Machine to another:
// a bulk send while they keep running, then the cut (stop them, demote
// the Writer to a Mirror, send the last changes), then the target becomes
// the Writer (the point of no return) and gets the same Containers. A
// failure before that point is undone: the source is the Writer again and
// its Containers run again.

// moveUnit is one Service Container that follows the volume.
type moveUnit struct {
	old     rpc.ContainerObservation
	spec    rpc.ContainerSpec // as created, environment values included
	files   map[string][]byte // spec.Files' content by digest, from the source
	running bool
	newName string // the creation key: a replayed create finds it
	newID   string
}

// moveOpts are the move command's flags.
type moveOpts struct {
	grace, readyTimeout time.Duration
}

// movePlan is what a move does, settled before its run opens.
type movePlan struct {
	writer, target string
	targetID       string // the target's Machine id, for the Serving Pointer
	units          []moveUnit
	image          []string // images the target lacks
}

func volumeMove() *cobra.Command {
	var to string
	var o moveOpts
	cmd := &cobra.Command{
		Use:   "move NAME --to MACHINE",
		Short: "Volume Run: move a volume's Writer, and the Containers mounting it, to another Machine",
		Long: `A Move run: snapshot the Writer and send it to --to while the Service
Containers mounting the volume keep running; then the cut: stop them,
demote the Writer to a Mirror, send the last changes, make --to the
Writer (the point of no return) and create the same Containers there
(same spec and deployment, so ingress and DNS follow), wait until they
are ready and remove the old ones. The source keeps a Mirror.

Before the point of no return a failure is undone: the source is made
the Writer again and its Containers are started. After it, running the
same move again finishes the job: with --to already the Writer it reads
the stopped source Containers again and creates (under the same creation
keys, so none twice), starts and waits for them on --to, moves the
Serving Pointers and removes the old ones; with nothing left it says so.
The downtime (stop on the source → ready on --to) is printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to: required (the Machine that becomes the Writer)")
			}
			if o.grace < 0 || o.readyTimeout < time.Second {
				return fmt.Errorf("--grace must be at least 0 and --ready-timeout at least 1s (got %s, %s)", o.grace, o.readyTimeout)
			}
			return withCopies(c, args[0], func(s session, cp copies) error { return moveVolume(c, s, cp, to, o) })
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the Machine that becomes the Writer (name or id; it needs a ZFS pool)")
	cmd.Flags().DurationVar(&o.grace, "grace", 10*time.Second, "how long each Container gets to stop at the cut")
	cmd.Flags().DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "how long each new Container may take to become ready")
	return cmd
}

// moveVolume moves cp's Writer to to, or finishes the Move there that
// passed its point of no return.
func moveVolume(c *cobra.Command, s session, cp copies, to string, o moveOpts) error {
	if slices.Equal(cp.writers, []string{to}) {
		return finishMove(c, s, cp, to, o)
	}
	w, err := cp.writer()
	if err != nil {
		return err
	}
	target, err := volumeTarget(cp, w, to, volumecopy.None, volumecopy.Mirror)
	if err != nil {
		return err
	}
	mp, err := planMove(c, s, cp.name, w, target)
	if err != nil {
		return err
	}
	return runVolume(c, s, cp, "move", target, func(r *volumeRun) error {
		r.run.Source = w
		mv := &mover{volumeRun: r, movePlan: mp, grace: o.grace, readyTimeout: o.readyTimeout}
		return mv.move(cp)
	})
}

// unfinished are the ends of a Move that may have stopped past its point
// of no return (open: its process may still run; the run's begin says).
var unfinished = []string{operator.RunFailed, operator.RunLost, operator.RunCancelled, operator.RunOpen}

// finishMove is a Move to the Machine that already is the Writer (design:
// once the source answers, running the Move again finishes it): when this
// computer's last Move of the volume went there and ended short, a run
// takes its remaining steps on the Containers the source still has.
func finishMove(c *cobra.Command, s session, cp copies, to string, o moveOpts) error {
	prev, ok, err := s.st.LastVolumeRun(s.ctx, cp.name, "move")
	if err != nil {
		return err
	}
	if !ok || prev.Target != to || !slices.Contains(unfinished, prev.State) {
		return nothingToMove(c, cp.name, to, "no Move of it to "+to+" is left unfinished here")
	}
	src := moveSource(prev)
	if src == "" {
		return fmt.Errorf("move gen %d names no source Machine: finish it with `ployz deploy`", prev.Gen)
	}
	mp, err := planMove(c, s, cp.name, src, to)
	if err != nil {
		return fmt.Errorf("finish move gen %d from %s: %w", prev.Gen, src, err)
	}
	if len(mp.units) == 0 {
		return nothingToMove(c, cp.name, to, fmt.Sprintf("%s holds no Container of the volume any more (move gen %d %s)", src, prev.Gen, prev.State))
	}
	stopped := stoppedAtCut(prev)
	for i := range mp.units {
		mp.units[i].running = mp.units[i].running || slices.Contains(stopped, mp.units[i].old.Name)
	}
	return runVolume(c, s, cp, "move", to, func(r *volumeRun) error {
		r.run.Source, r.run.Stopped, r.run.Finishes = src, stopped, keyGen(prev)
		fmt.Fprintf(r.errw, "  finishing move gen %d (%s past its point of no return): %s is the Writer\n", prev.Gen, prev.State, to)
		mv := &mover{volumeRun: r, movePlan: mp, grace: o.grace, readyTimeout: o.readyTimeout, promoted: true}
		if err := mv.fence(to, volumecopy.Writer); err != nil {
			return err
		}
		if err := mv.fence(src, volumecopy.Mirror); err != nil {
			return err
		}
		if err := mv.pullImages(volumecopy.Writer); err != nil {
			return err
		}
		return mv.startOnTarget()
	})
}

// nothingToMove says the Writer already is where the move asks, and why
// no run is needed.
func nothingToMove(c *cobra.Command, name, to, why string) error {
	return nothingToDo(c, to, fmt.Sprintf("%s already is the Writer of %s and %s: nothing to do", to, name, why))
}

// moveSource is a Move's source: recorded, or (a record from before
// Source) the Machine its check-writer step fenced first.
func moveSource(r operator.VolumeRun) string {
	if r.Source != "" {
		return r.Source
	}
	for _, st := range r.Steps {
		if st.Name == "check-"+volumecopy.Writer && st.Machine != r.Target {
			return st.Machine
		}
	}
	return ""
}

// stoppedAtCut names the source Containers a Move's cut stopped: the ones
// to start on the target.
func stoppedAtCut(r operator.VolumeRun) []string {
	out := slices.Clone(r.Stopped)
	for _, st := range r.Steps {
		if st.Name == "stop" && st.Outcome == operator.RunDone && !slices.Contains(out, st.Detail) {
			out = append(out, st.Detail)
		}
	}
	return out
}

// keyGen is the gen whose creation keys a Move's Containers carry: its
// own, or that of the Move it finishes.
func keyGen(r operator.VolumeRun) uint64 {
	if r.Finishes != 0 {
		return r.Finishes
	}
	return r.Gen
}

// planMove reads the Containers mounting name on the Writer and checks
// the target would admit them: a refusal here changes nothing.
func planMove(c *cobra.Command, s session, name, writer, target string) (movePlan, error) {
	ctx := c.Context()
	mp := movePlan{writer: writer, target: target}
	var src, dst rpc.ContainerList
	if err := s.ent.Call(ctx, rpc.Target{One: writer}, rpc.CmdListContainers, rpc.ListContainersRequest{}, &src); err != nil {
		return mp, fmt.Errorf("list Containers on %s: %w", writer, err)
	}
	if err := s.ent.Call(ctx, rpc.Target{One: target}, rpc.CmdListContainers, rpc.ListContainersRequest{}, &dst); err != nil {
		return mp, fmt.Errorf("--to: list Containers on %s: %w", target, err)
	}
	mp.targetID = dst.MachineID
	var imgs rpc.ImageList
	if err := s.ent.Call(ctx, rpc.Target{One: target}, rpc.CmdListImages, rpc.ListImagesRequest{}, &imgs); err != nil {
		return mp, fmt.Errorf("--to: list images on %s: %w", target, err)
	}
	var tags []string
	for _, im := range imgs.Images {
		tags = append(tags, im.Tags...)
	}
	for _, o := range src.Containers {
		if !mountsVolume(o.Spec, name) || o.Labels[rpc.LabelKind] == "hook" {
			continue
		}
		var ex rpc.ContainerExport
		if err := s.ent.Call(ctx, rpc.Target{One: writer}, rpc.CmdExportContainer, rpc.ExportContainerRequest{ID: o.ID, WithFiles: true}, &ex); err != nil {
			return mp, fmt.Errorf("read Container %s on %s: %w", o.Name, writer, err)
		}
		if err := shippedHeld(o.Name, writer, ex); err != nil {
			return mp, err
		}
		if err := rpc.AdmitLabels(target, dst.Labels, ex.Spec); err != nil {
			return mp, fmt.Errorf("--to: Container %s (service %s): %w", o.Name, o.Service, err)
		}
		if !deploy.HasImage(tags, ex.Spec.Image) && !slices.Contains(mp.image, ex.Spec.Image) {
			mp.image = append(mp.image, ex.Spec.Image)
		}
		mp.units = append(mp.units, moveUnit{old: o, spec: ex.Spec, files: ex.Files, running: deploy.Running(o)})
	}
	return mp, nil
}

// shippedHeld refuses a Container whose shipped files (compose configs,
// secrets) the source no longer answers in full: the target could not
// create it. An older source answers none.
func shippedHeld(name, writer string, ex rpc.ContainerExport) error {
	for _, f := range ex.Spec.Files {
		if _, ok := ex.Files[f.Digest]; !ok {
			return rpc.Errorf(rpc.CodeFailedPrecond, "Container %s mounts %s, shipped from the operator's computer, and %s did not answer its content (a Machine older than this CLI, or a directory shipped before Machines kept its archive): stop the Service, move the volume, then `ployz deploy` it",
				name, f.Source, writer).With("field", "spec.files")
		}
	}
	return nil
}

// mountsVolume reports whether spec bind-mounts the Provisioned Volume.
func mountsVolume(spec *rpc.ContainerSpec, name string) bool {
	if spec == nil {
		return false
	}
	for _, m := range spec.Mounts {
		if n, ok := volume.MountedVolume(m.Source); ok && m.Type == "bind" && n == name {
			return true
		}
	}
	return false
}

// creationKey is the Docker name of a unit's new Container in run gen:
// the same in a replay, so a second create finds the first.
func creationKey(spec rpc.ContainerSpec, volumeName string, gen uint64, oldID string) string {
	h := sha256.Sum256([]byte(volumeName + "\x00" + strconv.FormatUint(gen, 10) + "\x00" + oldID))
	return spec.Namespace + "-" + spec.Service + "-" + hex.EncodeToString(h[:])[:4]
}

// mover drives one Move run.
type mover struct {
	*volumeRun
	movePlan
	grace, readyTimeout time.Duration
	stopped             time.Time // when the first Container stopped
	promoted            bool      // the target is the Writer: no undo
}

func (mv *mover) move(cp copies) error {
	w, t := mv.writer, mv.target
	if err := mv.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	tv, hasT := cp.vols[t]
	trole := volumecopy.None
	if hasT {
		trole = copyRole(tv)
	}
	if err := mv.fence(t, trole); err != nil {
		return err
	}
	if err := mv.pullImages(trole); err != nil {
		return err
	}
	// The bulk send, while the Containers keep writing.
	snap, wv, err := mv.snapshot(w, cp.vols[w])
	if err != nil {
		return err
	}
	var tvp *rpc.Volume
	if hasT {
		tvp = &tv
	}
	if err := mv.transfer(w, wv, snap, t, tvp); err != nil {
		return err
	}
	if err := mv.cut(trole); err != nil {
		return errors.Join(err, mv.undo())
	}
	return mv.startOnTarget()
}

// pullImages has the target pull each image it lacks, admitted against
// the target's copy as it is now (trole).
func (mv *mover) pullImages(trole string) error {
	auth, err := registryAuthFor(mv.image)
	if err != nil {
		return fmt.Errorf("pull on %s: %w", mv.target, err)
	}
	for _, img := range mv.image {
		err := mv.step("pull-image", mv.target, func(st *operator.RunStep) error {
			st.Detail = img
			req := rpc.PullImageRequest{Image: img, RegistryAuth: auth(img)}
			err := mv.runTask(containerTask{machine: mv.target, expect: trole, what: "docker pull " + img,
				req:    rpc.VolumeTaskRequest{Kind: rpc.TaskPull, Pull: &req},
				direct: func() error { return mv.s.ent.Call(mv.ctx, rpc.Target{One: mv.target}, rpc.CmdPullImage, req, nil) }})
			if err != nil {
				return fmt.Errorf("%w (or `ployz image push %s --machine %s`, then move again)", err, img, mv.target)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// cut stops the source's Containers, demotes its Writer, sends the last
// changes and promotes the target: after it returns nil there is no undo.
func (mv *mover) cut(trole string) error {
	w, t := mv.writer, mv.target
	for i := range mv.units {
		u := &mv.units[i]
		if !u.running {
			continue
		}
		err := mv.step("stop", w, func(st *operator.RunStep) error {
			st.Detail = u.old.Name
			if mv.stopped.IsZero() {
				mv.stopped = time.Now()
			}
			err := mv.volumeRun.stop(w, u.old.Name, u.old.ID, mv.grace)
			if err == nil {
				mv.run.Stopped = append(mv.run.Stopped, u.old.Name)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	if mv.stopped.IsZero() {
		mv.stopped = time.Now()
	}
	if err := mv.transition("demote-writer", w, volumecopy.Writer, volumecopy.Mirror, nil); err != nil {
		return err
	}
	var wv, tv rpc.Volume
	if err := mv.inspect(w, &wv); err != nil {
		return err
	}
	if err := mv.inspect(t, &tv); err != nil {
		return err
	}
	cutSnap := "run-" + strconv.FormatUint(mv.run.Gen, 10) + "-cut"
	err := mv.step("snapshot-cut", w, func(st *operator.RunStep) error {
		if hasSnapshot(wv, cutSnap) != "" {
			st.Outcome, st.Detail = operator.StepSkipped, cutSnap+" is there"
			return nil
		}
		st.Detail = cutSnap
		return mv.s.ent.Call(mv.ctx, rpc.Target{One: w}, rpc.CmdSnapshotVolume, rpc.SnapshotVolumeRequest{Volume: mv.run.Volume, Snapshot: cutSnap}, &wv)
	})
	if err != nil {
		return err
	}
	if err := mv.transfer(w, wv, cutSnap, t, &tv); err != nil {
		return err
	}
	return mv.transition("promote", t, trole, volumecopy.Writer, func(out rpc.VolumeCopySet) string {
		mv.promoted = true
		return fmt.Sprintf("%s, epoch %d: the point of no return", out.Copy.Role, out.Copy.Epoch)
	})
}

// start starts Container id (name) on machine, whose copy is the Writer:
// an undo's on the source, or the new Writer's.
func (r *volumeRun) start(machine, name, id string) error {
	ref := rpc.ContainerRef{ID: id}
	return r.runTask(containerTask{machine: machine, expect: volumecopy.Writer, what: "docker start " + name,
		req:    rpc.VolumeTaskRequest{Kind: rpc.TaskStart, Start: &ref},
		direct: func() error { return r.s.ent.Call(r.ctx, rpc.Target{One: machine}, rpc.CmdStartContainer, ref, nil) }})
}

// stop stops Container id (name) at a cut on machine, whose copy is the
// Writer, giving it grace.
func (r *volumeRun) stop(machine, name, id string, grace time.Duration) error {
	req := rpc.StopContainerRequest{ID: id, GracePeriodSeconds: int(grace.Seconds())}
	return r.runTask(containerTask{machine: machine, expect: volumecopy.Writer, what: "docker stop " + name,
		req:    rpc.VolumeTaskRequest{Kind: rpc.TaskStop, Stop: &req},
		direct: func() error { return r.s.ent.Call(r.ctx, rpc.Target{One: machine}, rpc.CmdStopContainer, req, nil) }})
}

func (mv *mover) inspect(machine string, v *rpc.Volume) error {
	return mv.s.ent.Call(mv.ctx, rpc.Target{One: machine}, rpc.CmdInspectVolume, rpc.VolumeRequest{Name: mv.run.Volume}, v)
}

// undo puts the source back as it was before the cut: the Writer again,
// its Containers running. The target keeps what it received (a copy with
// no role, or its Mirror).
func (mv *mover) undo() error {
	if mv.promoted {
		return nil
	}
	// A fresh context: a Ctrl-C that cancelled the run must not cancel
	// its undo.
	mv.ctx = context.WithoutCancel(mv.ctx)
	err := mv.transition("undo-writer", mv.writer, volumecopy.Mirror, volumecopy.Writer, nil)
	var stopped []stoppedContainer
	for _, u := range mv.units {
		if u.running && err == nil {
			stopped = append(stopped, stoppedContainer{id: u.old.ID, name: u.old.Name})
		}
	}
	return mv.undoStart(mv.writer, stopped, err, "is the Writer of "+mv.run.Volume+" again")
}

// startOnTarget creates and starts each Container on the new Writer,
// waits until it is ready, then removes the old one.
func (mv *mover) startOnTarget() error {
	t := mv.target
	for i := range mv.units {
		u := &mv.units[i]
		u.newName = creationKey(u.spec, mv.run.Volume, keyGen(mv.run), u.old.ID)
		if err := mv.step("create", t, func(st *operator.RunStep) error { return mv.create(st, u) }); err != nil {
			return err
		}
		if !u.running {
			continue
		}
		if err := mv.step("start", t, func(st *operator.RunStep) error {
			st.Detail = u.newName
			return mv.start(t, u.newName, u.newID)
		}); err != nil {
			return err
		}
		if err := mv.step("wait-ready", t, func(st *operator.RunStep) error {
			var res rpc.WaitReadyResult
			err := mv.s.ent.Call(mv.ctx, rpc.Target{One: t}, rpc.CmdWaitReady,
				rpc.WaitReadyRequest{ID: u.newID, TimeoutSeconds: int(mv.readyTimeout.Seconds())}, &res)
			if err == nil && res.Outcome != "ready" {
				err = fmt.Errorf("%s did not become ready: %s %s", u.newName, res.Outcome, res.Message)
			}
			return err
		}); err != nil {
			return err
		}
	}
	if err := mv.movePointers(); err != nil {
		return err
	}
	// A run finishing an earlier Move did not stop anything: the
	// downtime began in that run and is not measured.
	if !mv.stopped.IsZero() {
		down := time.Since(mv.stopped).Round(time.Millisecond)
		mv.run.DowntimeSeconds = down.Seconds()
		fmt.Fprintf(mv.errw, "  downtime: %s (first stop on %s → last ready on %s)\n", down, mv.writer, t)
	}
	var errs []error
	for _, u := range mv.units {
		errs = append(errs, mv.step("remove-old", mv.writer, func(st *operator.RunStep) error {
			st.Detail = u.old.Name
			return mv.s.ent.Call(mv.ctx, rpc.Target{One: mv.writer}, rpc.CmdRemoveContainer, rpc.RemoveContainerRequest{ID: u.old.ID}, nil)
		}))
	}
	return errors.Join(errs...)
}

// movePointers points each moved Service's Serving Pointer at its new
// Containers in place of the old ones, so ingress and Internal DNS follow,
// and waits (briefly) for the Machines' acks. A Service without a pointer
// is left without one.
func (mv *mover) movePointers() error {
	byService := map[string][]*moveUnit{}
	var keys []string
	for i := range mv.units {
		u := &mv.units[i]
		k := serving.ServiceKey(u.spec.Namespace, u.spec.Service)
		if byService[k] == nil {
			keys = append(keys, k)
		}
		byService[k] = append(byService[k], u)
	}
	for _, k := range keys {
		err := mv.step("move-pointer", "", func(st *operator.RunStep) error { return mv.movePointer(st, k, byService[k]) })
		if err != nil {
			return err
		}
	}
	return nil
}

func (mv *mover) movePointer(st *operator.RunStep, key string, units []*moveUnit) error {
	var cur rpc.ServingStatus
	if err := mv.s.ent.Call(mv.ctx, rpc.Target{}, rpc.CmdServingStatus, rpc.ServingStatusRequest{Services: []string{key}}, &cur); err != nil {
		return err
	}
	var ptr rpc.ServiceServing
	for _, sv := range cur.Services {
		if sv.Service == key {
			ptr = sv
		}
	}
	if ptr.Pointer == "" {
		st.Outcome, st.Detail = operator.StepSkipped, key+" has no Serving Pointer"
		return nil
	}
	// The new Containers replace the old; one a finished Move's earlier
	// run already pointed at is not named twice.
	replaced := map[string]bool{}
	var next []rpc.ServingContainer
	for _, u := range units {
		replaced[u.old.ID], replaced[u.newID] = true, true
		if u.running {
			next = append(next, rpc.ServingContainer{ID: u.newID, MachineID: mv.targetID, Deployment: u.spec.DeploymentID})
		}
	}
	for _, c := range ptr.Containers {
		if !replaced[c.ID] {
			next = append(next, c)
		}
	}
	if sameIDs(next, ptr.Containers) {
		st.Outcome, st.Detail = operator.StepSkipped, fmt.Sprintf("%s already names the new Containers (%s)", key, ptr.Pointer)
		return nil
	}
	var moved rpc.ServingPointerMoved
	if err := mv.s.ent.Call(mv.ctx, rpc.Target{}, rpc.CmdMoveServingPointer,
		rpc.MoveServingPointerRequest{Service: key, Deployment: ptr.Deployment, Containers: next}, &moved); err != nil {
		return err
	}
	var acked rpc.ServingStatus
	err := mv.s.ent.Call(mv.ctx, rpc.Target{}, rpc.CmdServingStatus, rpc.ServingStatusRequest{Services: []string{key}, WaitPointer: moved.ID, WaitSeconds: 10}, &acked)
	st.Detail = fmt.Sprintf("%s → %s (%d Containers)", key, moved.ID, len(next))
	if err == nil && len(acked.Services) == 1 {
		sv := acked.Services[0]
		sv.Pointer = moved.ID
		if p := sv.Pending(); len(p) > 0 {
			st.Detail += "; not acked yet by " + strings.Join(p, ", ")
		}
	}
	return nil
}

// sameIDs reports whether a and b name the same Containers.
func sameIDs(a, b []rpc.ServingContainer) bool {
	if len(a) != len(b) {
		return false
	}
	ids := func(cs []rpc.ServingContainer) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(ids(a), ids(b))
}

// create is one unit's create_container; a replay finds the Container
// its creation key named and creates no second one.
func (mv *mover) create(st *operator.RunStep, u *moveUnit) error {
	st.Detail = u.newName
	var ob rpc.ContainerObservation
	err := mv.s.ent.Call(mv.ctx, rpc.Target{One: mv.target}, rpc.CmdCreateContainer, rpc.CreateContainerRequest{Name: u.newName, Spec: u.spec, Files: u.files}, &ob)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeConflict {
		var ex rpc.ContainerExport
		if xerr := mv.s.ent.Call(mv.ctx, rpc.Target{One: mv.target}, rpc.CmdExportContainer, rpc.ContainerRef{ID: u.newName}, &ex); xerr == nil {
			st.Outcome, st.Detail = operator.StepSkipped, u.newName+" is there (its creation key)"
			u.newID = ex.ID
			return nil
		}
	}
	if err != nil {
		return err
	}
	u.newID = ob.ID
	return nil
}
