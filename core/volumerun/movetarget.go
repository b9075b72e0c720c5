package volumerun

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/serving"
)

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
		if err := mv.step("wait-ready", t, func(*operator.RunStep) error { return mv.waitReady(u) }); err != nil {
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
		mv.note(t, fmt.Sprintf("downtime: %s (first stop on %s → last ready on %s)", down, mv.writer, t))
	}
	var errs []error
	for _, u := range mv.units {
		errs = append(errs, mv.step("remove-old", mv.writer, func(st *operator.RunStep) error {
			st.Detail = u.old.Name
			return rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{One: mv.writer}, rpc.RemoveContainer, rpc.RemoveContainerRequest{ID: u.old.ID}, nil)
		}))
	}
	return errors.Join(errs...)
}

// waitReady waits until u's new Container is ready on the target.
func (mv *mover) waitReady(u *moveUnit) error {
	var res rpc.WaitReadyResult
	err := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{One: mv.target}, rpc.WaitReady, rpc.WaitReadyRequest{ID: u.newID, TimeoutSeconds: int(mv.ReadyTimeout.Seconds())}, &res)
	if err == nil && res.Outcome != "ready" {
		err = fmt.Errorf("%s did not become ready: %s %s", u.newName, res.Outcome, res.Message)
	}
	return err
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
	if err := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{Services: []string{key}}, &cur); err != nil {
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
	if err := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{}, rpc.MoveServingPointer, rpc.MoveServingPointerRequest{Service: key, Deployment: ptr.Deployment, Containers: next}, &moved); err != nil {
		return err
	}
	var acked rpc.ServingStatus
	err := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{Services: []string{key}, WaitPointer: moved.ID, WaitSeconds: 10}, &acked)
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
	err := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{One: mv.target}, rpc.CreateContainer, rpc.CreateContainerRequest{Name: u.newName, Spec: u.spec, Files: u.files}, &ob)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeConflict {
		var ex rpc.ContainerExport
		if xerr := rpc.InvokeInto(mv.ctx, mv.Entry, rpc.Target{One: mv.target}, rpc.ExportContainer, rpc.ExportContainerRequest{ID: u.newName}, &ex); xerr == nil {
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
