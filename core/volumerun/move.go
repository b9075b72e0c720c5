package volumerun

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// A Move run (design: Volume handover) hands a Provisioned Volume and
// the Service Containers mounting it from the Writer's Machine to another:
// a bulk send while they keep running, then the cut (stop them, demote
// the Writer to a Mirror, send the last changes), then the target becomes
// the Writer (the point of no return) and gets the same Containers. A
// failure before that point is undone: the source is the Writer again and
// its Containers run again.

// MoveOptions shape a Move.
type MoveOptions struct {
	// Grace is how long each Container gets to stop at the cut.
	Grace time.Duration
	// ReadyTimeout is how long each new Container may take to become
	// ready (0: 2 minutes).
	ReadyTimeout time.Duration
}

// moveUnit is one Service Container that follows the volume.
type moveUnit struct {
	old     rpc.ContainerObservation
	spec    rpc.ContainerSpec // as created, environment values included
	files   map[string][]byte // spec.Files' content by digest, from the source
	running bool
	newName string // the creation key: a replayed create finds it
	newID   string
}

// movePlan is what a move does, settled before its run opens.
type movePlan struct {
	writer, target string
	targetID       string // the target's Machine id, for the Serving Pointer
	units          []moveUnit
	image          []string // images the target lacks
}

// Move moves volume name's Writer, and the Service Containers mounting
// it, to Machine to; with to already the Writer it finishes this
// computer's last Move there that ended past its point of no return, or
// answers Nothing.
func (rn *Runner) Move(ctx context.Context, name, to string, o MoveOptions) (Result, error) {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if slices.Equal(cp.Writers, []string{to}) {
		return rn.finishMove(ctx, cp, to, o)
	}
	w, err := cp.Writer()
	if err != nil {
		return Result{}, err
	}
	target, err := cp.target(w, to, volumecopy.None, volumecopy.Mirror)
	if err != nil {
		return Result{}, err
	}
	mp, err := rn.planMove(ctx, cp.Name, w, target)
	if err != nil {
		return Result{}, err
	}
	return rn.runVolume(ctx, cp, "move", target, func(r *volumeRun) error {
		r.run.Source = w
		mv := &mover{volumeRun: r, movePlan: mp, MoveOptions: o}
		return mv.move(cp)
	})
}

// unfinished are the ends of a Move that may have stopped past its point
// of no return (open: its process may still run; the run's begin says).
var unfinished = []string{operator.RunFailed, operator.RunLost, operator.RunCancelled, operator.RunOpen}

// finishMove is a Move to the Machine that already is the Writer (design:
// once the source answers, running the Move again finishes it): when the
// last Move of the volume (any operator's) went there and ended short, a run
// takes its remaining steps on the Containers the source still has.
func (rn *Runner) finishMove(ctx context.Context, cp Copies, to string, o MoveOptions) (Result, error) {
	nothingToMove := func(why string) (Result, error) {
		return nothing(to, fmt.Sprintf("%s already is the Writer of %s and %s: nothing to do", to, cp.Name, why))
	}
	prev, ok, err := rn.LastRun(ctx, cp.Name, "move")
	if err != nil {
		return Result{}, err
	}
	if !ok || prev.Target != to || !slices.Contains(unfinished, prev.State) {
		return nothingToMove("no Move of it to " + to + " is left unfinished")
	}
	src := moveSource(prev)
	if src == "" {
		return Result{}, fmt.Errorf("move gen %d names no source Machine: finish it with `ployz deploy`", prev.Gen)
	}
	mp, err := rn.planMove(ctx, cp.Name, src, to)
	if err != nil {
		return Result{}, fmt.Errorf("finish move gen %d from %s: %w", prev.Gen, src, err)
	}
	if len(mp.units) == 0 {
		return nothingToMove(fmt.Sprintf("%s holds no Container of the volume any more (move gen %d %s)", src, prev.Gen, prev.State))
	}
	stopped := stoppedAtCut(prev)
	for i := range mp.units {
		mp.units[i].running = mp.units[i].running || slices.Contains(stopped, mp.units[i].old.Name)
	}
	return rn.runVolume(ctx, cp, "move", to, func(r *volumeRun) error {
		r.run.Source, r.run.Stopped, r.run.Finishes = src, stopped, keyGen(prev)
		r.note(to, fmt.Sprintf("finishing move gen %d (%s past its point of no return): %s is the Writer", prev.Gen, prev.State, to))
		mv := &mover{volumeRun: r, movePlan: mp, MoveOptions: o, promoted: true}
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
func (rn *Runner) planMove(ctx context.Context, name, writer, target string) (movePlan, error) {
	mp := movePlan{writer: writer, target: target}
	var src, dst rpc.ContainerList
	if err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: writer}, rpc.ListContainers, rpc.ListContainersRequest{OneOffs: true}, &src); err != nil {
		return mp, fmt.Errorf("list Containers on %s: %w", writer, err)
	}
	if err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: target}, rpc.ListContainers, rpc.ListContainersRequest{}, &dst); err != nil {
		return mp, fmt.Errorf("--to: list Containers on %s: %w", target, err)
	}
	mp.targetID = dst.MachineID
	var imgs rpc.ImageList
	if err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: target}, rpc.ListImages, rpc.ListImagesRequest{}, &imgs); err != nil {
		return mp, fmt.Errorf("--to: list images on %s: %w", target, err)
	}
	var tags []string
	for _, im := range imgs.Images {
		tags = append(tags, im.Tags...)
	}
	for _, o := range src.Containers {
		if !MountsVolume(o.Spec, name) || o.Labels[rpc.LabelKind] == rpc.KindHook {
			continue
		}
		if o.Labels[rpc.LabelKind] == rpc.KindRun {
			if deploy.Running(o) {
				return mp, rpc.Errorf(rpc.CodeFailedPrecond, "Container %s, a one-off `ployz run` of service %s, is running on volume %s on %s: let it end (or stop it), then move",
					o.Name, o.Service, name, writer).With("container", o.Name)
			}
			continue // an ended run is not moved: it never runs again
		}
		var ex rpc.ContainerExport
		if err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: writer}, rpc.ExportContainer, rpc.ExportContainerRequest{ID: o.ID, WithFiles: true}, &ex); err != nil {
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
	MoveOptions
	stopped  time.Time // when the first Container stopped
	promoted bool      // the target is the Writer: no undo
}

func (mv *mover) move(cp Copies) error {
	w, t := mv.writer, mv.target
	if err := mv.fence(w, volumecopy.Writer); err != nil {
		return err
	}
	tv, hasT := cp.Vols[t]
	trole := volumecopy.None
	if hasT {
		trole = Role(tv)
	}
	if err := mv.fence(t, trole); err != nil {
		return err
	}
	if err := mv.pullImages(trole); err != nil {
		return err
	}
	// The bulk send, while the Containers keep writing.
	snap, wv, err := mv.snapshot("snapshot", w, cp.Vols[w], "")
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
	auth := func(string) string { return "" }
	if mv.RegistryAuth != nil && len(mv.image) > 0 {
		a, err := mv.RegistryAuth(mv.image)
		if err != nil {
			return fmt.Errorf("pull on %s: %w", mv.target, err)
		}
		auth = a
	}
	for _, img := range mv.image {
		err := mv.step("pull-image", mv.target, func(st *operator.RunStep) error {
			st.Detail = img
			req := rpc.PullImageRequest{Image: img, RegistryAuth: auth(img)}
			err := mv.runTask(containerTask{machine: mv.target, expect: trole, what: "docker pull " + img,
				req: rpc.VolumeTaskRequest{Kind: rpc.TaskPull, Pull: &req},
				direct: func() error {
					return rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{One: mv.target}, rpc.PullImage, req, nil)
				}})
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
	for _, u := range mv.units {
		if !u.running {
			continue
		}
		if mv.stopped.IsZero() {
			mv.stopped = time.Now()
		}
		if err := mv.stop(w, u.old.Name, u.old.ID, mv.Grace); err != nil {
			return err
		}
	}
	if mv.stopped.IsZero() {
		mv.stopped = time.Now()
	}
	if err := mv.transition("demote-writer", w, volumecopy.Writer, volumecopy.Mirror, nil); err != nil {
		return err
	}
	wv, err := mv.inspect(w)
	if err != nil {
		return err
	}
	tv, err := mv.inspect(t)
	if err != nil {
		return err
	}
	cutSnap, wv, err := mv.snapshot("snapshot-cut", w, wv, "-cut")
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

// undo puts the source back as it was before the cut: the Writer again,
// its Containers running. The target keeps what it received (a copy with
// no role, or its Mirror).
func (mv *mover) undo() error {
	if mv.promoted {
		return nil
	}
	// A fresh context: a cancel that ended the run must not cancel its
	// undo.
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
