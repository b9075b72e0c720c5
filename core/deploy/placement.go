package deploy

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/ployz/ployz/core/rpc"
)

// planService plans one declared Service against the Snapshot.
func planService(ns string, svc Service, snap Snapshot, depID string, load map[string]int, pull string, restart bool) ([]Row, ServiceSummary, []string, error) {
	var existing, hooks []rpc.ContainerObservation
	for _, m := range snap.Machines {
		for _, c := range m.Containers {
			if c.Namespace != ns || c.Service != svc.Name {
				continue
			}
			switch kind(c) {
			case rpc.KindHook:
				hooks = append(hooks, c)
			case rpc.KindRun:
				// A one-off run is no replica; its daemon removes it.
			default:
				existing = append(existing, c)
			}
		}
	}
	// Oldest first: the kept Containers are the longest serving ones.
	sort.SliceStable(existing, func(i, j int) bool {
		return existing[i].CreatedAt < existing[j].CreatedAt || existing[i].CreatedAt == existing[j].CreatedAt && existing[i].Name < existing[j].Name
	})
	serviceID := ""
	for i := len(existing) - 1; i >= 0 && serviceID == ""; i-- {
		serviceID = existing[i].ServiceID
	}
	if serviceID == "" {
		serviceID = NewID(6)
	}
	spec := serviceSpec(ns, svc)
	spec.ServiceID, spec.DeploymentID = serviceID, depID
	var err error
	if spec.SpecHash, err = snap.Salts.hash(spec); err != nil {
		return nil, ServiceSummary{}, nil, err
	}
	pl := &placer{svc: svc, snap: snap, spec: spec, unsalted: SpecHash(spec), machines: map[string]MachineState{}, load: load, restart: restart,
		lost: snap.LostReplicas(ns, svc.Name)}
	for _, c := range existing {
		pl.specLive = pl.specLive || pl.current(c) && Running(c)
	}
	for _, m := range snap.Machines {
		pl.machines[m.ID] = m
	}
	sum := ServiceSummary{Name: svc.Name, ServiceID: serviceID, Mode: svc.Mode, Desired: svc.Replicas, DependsOn: svc.DependsOn, Ingress: svc.Ingress, Image: svc.Spec.Image}
	if svc.Mode == ModeReplicated && svc.Replicas == 0 {
		return pl.stopAll(existing, hooks), sum, nil, nil
	}
	elig, warns, err := eligible(ns, svc, snap)
	if errors.Is(err, errVolumeUnseen) {
		// Unknown safe hold: creating it here would start on an empty
		// volume while the real one may sit on an unobserved Machine.
		sum.Unplaced = []string{fmt.Sprintf("service %q held: volume %s is on no observed Machine and may be on one not observed: %s",
			svc.Name, strings.Join(svc.localVolumes(), ", "), snap.MissingNames())}
		if hint := volumeRestoreHint(svc, snap); hint != "" {
			sum.Unplaced[0] += "; " + hint
		}
		return nil, sum, nil, nil
	}
	if err != nil {
		return nil, sum, nil, err
	}
	sortByName(elig)
	if svc.Mode == ModeGlobal {
		sum.Desired = len(elig)
		err = pl.global(elig, existing)
	} else {
		err = pl.replicated(elig, existing)
	}
	if err != nil {
		return nil, sum, nil, err
	}
	iw, err := pl.checkImage(pull)
	if err != nil {
		return nil, sum, nil, err
	}
	warns = append(warns, iw...)
	sum.Unplaced = pl.unplaced
	hookRows, err := pl.hookRows()
	if err != nil {
		return nil, sum, nil, err
	}
	rows := append(hookRows, pl.rows...)
	for _, h := range hooks {
		rows = append(rows, pl.row(h, OpRemove, "leftover pre-deploy hook Container"))
	}
	return rows, sum, warns, nil
}

type placer struct {
	svc  Service
	snap Snapshot
	spec rpc.ContainerSpec
	// unsalted is the spec's hash as versions before salting wrote it.
	unsalted string
	machines map[string]MachineState
	// load is Containers per Machine, including the plan's earlier
	// creates and removals, for "fewest containers first".
	load map[string]int
	// specLive: a Container of this exact spec already runs, so the
	// pre-deploy hooks ran for it and a scale-up does not run them again.
	specLive bool
	// restart replaces up-to-date running Containers too.
	restart  bool
	unplaced []string
	rows     []Row
	creates  []Row
	removes  []Row
	// lost are the Containers the Service's Serving Pointer names on
	// Down Machines; retires the rows that take them out of it.
	lost    []rpc.ServingContainer
	retires []Row
	// names are the Container names taken (name fills it on first use).
	names map[string]bool
}

// nameSuffix is a new Container name's random part (a variable for tests).
var nameSuffix = func() string { return NewID(2) }

// name is a new Container name for the Service, unlike every name on an
// observed Machine and every name this plan gave: with 4 hex digits, two
// of 10 replicas share a suffix in about one plan of 1,500, and Docker
// refuses a second Container of the same name on one Machine (found by
// the executor fan-out harness, issue 49).
func (pl *placer) name() string {
	if pl.names == nil {
		pl.names = map[string]bool{}
		for _, m := range pl.snap.Machines {
			for _, c := range m.Containers {
				pl.names[c.Name] = true
			}
		}
	}
	prefix := pl.spec.Namespace + "-" + pl.svc.Name + "-"
	n := prefix + nameSuffix()
	for try := 0; pl.names[n]; try++ {
		if try >= 64 { // 65,536 names taken: a longer suffix
			n = prefix + NewID(4)
			continue
		}
		n = prefix + nameSuffix()
	}
	pl.names[n] = true
	return n
}

func (pl *placer) row(c rpc.ContainerObservation, op, reason string) Row {
	m := pl.machines[c.MachineID]
	name := m.Name
	if name == "" {
		name = c.MachineID
	}
	r := Row{MachineID: c.MachineID, Machine: name, Service: pl.svc.Name, Op: op, Reason: reason,
		OldID: c.ID, OldName: c.Name, StopGraceSeconds: pl.svc.StopGraceSeconds}
	if op == OpReplace {
		r.NewName, r.Strategy = pl.name(), StartFirst
		spec := pl.spec
		r.Spec = &spec
		r.OldRunning = Running(c)
		switch {
		case len(clashingHostPorts(pl.svc)) > 0:
			r.Strategy, r.Reason = StopFirst, reason+"; stop-first: host port "+joinInts(clashingHostPorts(pl.svc))+" would clash"
		case pl.svc.UpdateOrder == StopFirst:
			r.Strategy, r.Reason = StopFirst, reason+"; stop-first: deploy.update_config.order"
		case pl.svc.UpdateOrder == StartFirst:
			r.Reason = reason + "; start-first: deploy.update_config.order"
		case (pl.desired() == 1 || pl.svc.Mode == ModeGlobal) && len(pl.svc.localVolumes()) > 0:
			r.Strategy, r.Reason = StopFirst, reason+"; stop-first: single Container on volume "+strings.Join(pl.svc.localVolumes(), ", ")
		}
	}
	return r
}

func (pl *placer) createRow(m MachineState, reason string) Row {
	spec := pl.spec
	return Row{MachineID: m.ID, Machine: m.Name, Service: pl.svc.Name, Op: OpCreate, Reason: reason, NewName: pl.name(), Spec: &spec}
}

func (pl *placer) desired() int {
	if pl.svc.Mode == ModeGlobal {
		return 0
	}
	return pl.svc.Replicas
}

// stopAll is replicas: 0 — the Service stays declared, its Containers stop.
func (pl *placer) stopAll(existing, hooks []rpc.ContainerObservation) []Row {
	var rows []Row
	for _, c := range existing {
		if Running(c) {
			rows = append(rows, pl.row(c, OpStop, "replicas: 0"))
		} else {
			rows = append(rows, pl.row(c, OpUnchanged, "replicas: 0; already "+c.State))
		}
	}
	for _, h := range hooks {
		rows = append(rows, pl.row(h, OpRemove, "leftover pre-deploy hook Container"))
	}
	for _, c := range pl.lost {
		rows = append(rows, pl.retireRow(c))
	}
	return rows
}

// current reports whether c runs this exact spec: its hash is the salted
// one, or the unsalted one a Container started before salting carries, so
// upgrading to salted hashes redeploys nothing.
func (pl *placer) current(c rpc.ContainerObservation) bool {
	return c.SpecHash != "" && (c.SpecHash == pl.spec.SpecHash || c.SpecHash == pl.unsalted)
}

// keep decides what to do with a Container that stays in its slot.
func (pl *placer) keep(c rpc.ContainerObservation) {
	switch {
	case !pl.current(c):
		reason := "spec changed"
		if c.SpecHash == "" {
			reason = "no spec hash on the existing Container"
		}
		pl.rows = append(pl.rows, pl.row(c, OpReplace, reason))
	case !Running(c):
		pl.rows = append(pl.rows, pl.row(c, OpStart, "up to date but "+c.State))
	case pl.restart:
		pl.rows = append(pl.rows, pl.row(c, OpReplace, "requested restart"))
	default:
		pl.rows = append(pl.rows, pl.row(c, OpUnchanged, "up to date"))
	}
}

// score ranks a Container for keeping: lower is better. A running one
// serves now, so it beats a stopped one even when outdated (a failed new
// Container kept for its logs must not displace a serving old one).
func (pl *placer) score(c rpc.ContainerObservation) int {
	s := 0
	if !Running(c) {
		s += 2
	}
	if !pl.current(c) {
		s++
	}
	return s
}

func better(s1, n1, s2, n2 int) bool { return s1 < s2 || s1 == s2 && n1 < n2 }

// preferred orders a Machine's Containers, best to keep first.
func (pl *placer) preferred(cs []rpc.ContainerObservation) {
	sort.SliceStable(cs, func(i, j int) bool { return pl.score(cs[i]) < pl.score(cs[j]) })
}

func (pl *placer) global(elig []MachineState, existing []rpc.ContainerObservation) error {
	on := map[string][]rpc.ContainerObservation{}
	for _, c := range existing {
		on[c.MachineID] = append(on[c.MachineID], c)
	}
	isElig := map[string]bool{}
	for _, m := range elig {
		isElig[m.ID] = true
		cs := on[m.ID]
		if len(cs) == 0 {
			pl.creates = append(pl.creates, pl.createRow(m, "global: one per eligible Machine"))
			continue
		}
		pl.preferred(cs)
		pl.keep(cs[0])
		for _, c := range cs[1:] {
			pl.removes = append(pl.removes, pl.row(c, OpRemove, "global: surplus on this Machine"))
		}
	}
	for _, c := range existing {
		if !isElig[c.MachineID] {
			pl.removeIneligible(c)
		}
	}
	pl.rows = append(append(pl.rows, pl.creates...), pl.removes...)
	return nil
}

func (pl *placer) removeIneligible(c rpc.ContainerObservation) {
	m, ok := pl.machines[c.MachineID]
	if ok && !m.Observed {
		return // unobserved: nothing is known, nothing is touched
	}
	pl.removes = append(pl.removes, pl.row(c, OpRemove, "Machine no longer eligible"))
}

func (pl *placer) replicated(elig []MachineState, existing []rpc.ContainerObservation) error {
	limit := pl.svc.MaxPerMachine
	isElig := map[string]bool{}
	for _, m := range elig {
		isElig[m.ID] = true
	}
	var cands []rpc.ContainerObservation
	for _, c := range existing {
		if isElig[c.MachineID] {
			cands = append(cands, c)
		} else {
			pl.removeIneligible(c)
		}
	}
	// Greedy: each slot keeps the best Container left — running before
	// stopped, up to date before outdated, then the Machine with the
	// fewest kept so far (spread), then the oldest.
	count := map[string]int{}
	kept := 0
	for kept < pl.svc.Replicas && len(cands) > 0 {
		best := -1
		for i, c := range cands {
			if limit > 0 && count[c.MachineID] >= limit {
				continue
			}
			if best < 0 || better(pl.score(c), count[c.MachineID], pl.score(cands[best]), count[cands[best].MachineID]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c := cands[best]
		cands = append(cands[:best], cands[best+1:]...)
		pl.keep(c)
		count[c.MachineID]++
		kept++
	}
	for _, c := range cands {
		reason := fmt.Sprintf("surplus: replicas %d", pl.svc.Replicas)
		if kept < pl.svc.Replicas {
			reason = fmt.Sprintf("max_per_machine %d", limit)
		}
		pl.removes = append(pl.removes, pl.row(c, OpRemove, reason))
	}
	total := pl.load
	for ; kept < pl.svc.Replicas; kept++ {
		best := -1
		for i, m := range elig {
			if limit > 0 && count[m.ID] >= limit {
				continue
			}
			if best < 0 || count[m.ID] < count[elig[best].ID] || count[m.ID] == count[elig[best].ID] && total[m.ID] < total[elig[best].ID] {
				best = i
			}
		}
		if best < 0 && !pl.snap.Complete() {
			// Unknown safe hold (bet 10): the missing replicas may run on
			// Machines this snapshot could not see.
			pl.unplaced = append(pl.unplaced, fmt.Sprintf("service %q: %d of %d replicas not placed: max_per_machine %d and only %s observed eligible; not observed: %s",
				pl.svc.Name, pl.svc.Replicas-kept, pl.svc.Replicas, limit, names(elig), pl.snap.MissingNames()))
			break
		}
		if best < 0 {
			return fmt.Errorf("replicas %d: max_per_machine %d allows only %d on the eligible Machines (%s)", pl.svc.Replicas, limit, limit*len(elig), names(elig))
		}
		m := elig[best]
		count[m.ID]++
		total[m.ID]++
		pl.creates = append(pl.creates, pl.createRow(m, fmt.Sprintf("replica %d of %d", kept+1, pl.svc.Replicas)))
	}
	pl.restoreReplicas(kept)
	pl.rows = append(append(append(pl.rows, pl.creates...), pl.removes...), pl.retires...)
	return nil
}

// serviceSpec is the spec of svc's Containers before the per-deploy
// fields (service id, deployment id, spec hash) are set.
func serviceSpec(ns string, svc Service) rpc.ContainerSpec {
	spec := svc.Spec
	spec.Namespace, spec.Service = ns, svc.Name
	return spec
}

// hookSpec is the spec of the Container that runs hook h of the Service
// whose spec is base.
func hookSpec(base rpc.ContainerSpec, h Hook) rpc.ContainerSpec {
	spec := base
	spec.Kind = "hook"
	spec.Entrypoint, spec.Command = h.Command[:1], h.Command[1:]
	spec.Ports, spec.Healthcheck, spec.Readiness, spec.Restart = nil, nil, ReadyNone, "no"
	if len(h.Environment) > 0 {
		env := map[string]string{}
		for k, v := range base.Env {
			env[k] = v
		}
		for k, v := range h.Environment {
			env[k] = v
		}
		spec.Env = env
	}
	return spec
}

// hookRows are the x-pre_deploy hooks, run on the first Machine that gets
// a new Container, only when the Service gets Containers of a spec that
// runs nowhere yet.
func (pl *placer) hookRows() ([]Row, error) {
	if len(pl.svc.Hooks) == 0 || pl.specLive {
		return nil, nil
	}
	for _, r := range pl.rows {
		if r.Op != OpCreate && r.Op != OpReplace {
			continue
		}
		var out []Row
		for i, h := range pl.svc.Hooks {
			spec := hookSpec(pl.spec, h)
			var err error
			if spec.SpecHash, err = pl.snap.Salts.hash(spec); err != nil {
				return nil, err
			}
			t := h.TimeoutSeconds
			if t == 0 {
				t = 300
			}
			out = append(out, Row{MachineID: r.MachineID, Machine: r.Machine, Service: pl.svc.Name, Op: OpHook,
				Reason: fmt.Sprintf("x-pre_deploy[%d]: %s", i, strings.Join(h.Command, " ")), NewName: pl.spec.Namespace + "-" + pl.svc.Name + "-hook-" + NewID(2),
				Spec: &spec, HookTimeoutSeconds: t})
		}
		return out, nil
	}
	return nil, nil
}

// checkImage, under pull policy never, refuses a plan whose image is
// missing on every Machine that would create a Container from it, and
// warns about the others; otherwise those Machines pull it (markPulls).
func (pl *placer) checkImage(pull string) ([]string, error) {
	if pull != PullNever || pl.svc.Build != nil {
		return nil, nil // pulled, or built here and pushed before the plan runs
	}
	var targets, missing []string
	allKnownMissing := true
	seen := map[string]bool{}
	for _, r := range pl.rows {
		if r.Spec == nil || seen[r.MachineID] {
			continue
		}
		seen[r.MachineID] = true
		targets = append(targets, r.Machine)
		m := pl.machines[r.MachineID]
		switch {
		case !m.ImagesKnown:
			allKnownMissing = false
		case HasImage(m.Images, pl.spec.Image):
			allKnownMissing = false
		default:
			missing = append(missing, r.Machine)
		}
	}
	if len(targets) == 0 || len(missing) == 0 {
		return nil, nil
	}
	if allKnownMissing {
		return nil, fmt.Errorf("image %s is missing on every target Machine (%s); push it first (ployz image push) or let Machines pull it (--pull missing)", pl.spec.Image, strings.Join(targets, ", "))
	}
	return []string{fmt.Sprintf("service %q: image %s is missing on %s; creating there will fail", pl.svc.Name, pl.spec.Image, strings.Join(missing, ", "))}, nil
}

func joinInts(xs []int) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ", ")
}
