package client

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/volume"
)

// RunRequest is a one-off run of a Service's current deployment
// (`ployz run`).
type RunRequest struct {
	Namespace string
	Service   string
	// Command replaces the image's entrypoint and the Service's command,
	// as an x-pre_deploy hook's does; empty runs the Service's own.
	Command []string
	// Machine names the Machine to run on (name, id or id prefix); empty
	// is one holding the Service's current Containers.
	Machine string
	// Detach starts the run and returns; Keep leaves its Container after
	// it ended.
	Detach, Keep bool
	// TTY allocates a terminal of Width x Height; Stdin sends RunIO.Stdin.
	TTY, Stdin    bool
	Width, Height uint16
}

// NotDeployedError is a Service with no Container to run a one-off from.
type NotDeployedError struct {
	Service, Namespace, Unobserved string
}

func (e *NotDeployedError) Error() string {
	msg := fmt.Sprintf("service %s: not deployed in %s (no Container of it on the observed Machines)", e.Service, e.Namespace)
	if e.Unobserved != "" {
		msg += "; not observed: " + e.Unobserved
	}
	return msg
}

// runChoice is the Container a run copies and the Machine it runs on.
type runChoice struct {
	from   rpc.ContainerObservation
	target deploy.MachineState
}

// chooseRun picks, from snap, the Container of service (in ns) whose spec
// a one-off copies — one of the current deployment (the Serving
// Pointer's, else the newest), running ones first — and the Machine it
// runs on: machineRef's, else the first Machine holding such a Container
// that admits it.
func chooseRun(snap deploy.Snapshot, ns, service, current, machineRef string) (runChoice, error) {
	cands := currentContainers(ServiceOf(snap, ns, service), current)
	if len(cands) == 0 {
		e := &NotDeployedError{Service: service, Namespace: ns}
		if !snap.Complete() {
			e.Unobserved = snap.MissingNames()
		}
		return runChoice{}, e
	}
	if machineRef != "" {
		m, err := runMachine(snap, machineRef)
		if err != nil {
			return runChoice{}, err
		}
		from := cands[0]
		for _, c := range cands {
			if c.MachineID == m.ID {
				from = c
				break
			}
		}
		if err := admitsRun(m, from, snap); err != nil {
			return runChoice{}, fmt.Errorf("--machine %s: %w", machineRef, err)
		}
		return runChoice{from: from, target: m}, nil
	}
	var first error
	for _, c := range cands {
		m, _ := snap.Machine(c.MachineID)
		err := admitsRun(m, c, snap)
		if err == nil {
			return runChoice{from: c, target: m}, nil
		}
		if first == nil {
			first = fmt.Errorf("machine %s: %w", cmp.Or(m.Name, c.MachineID), err)
		}
	}
	return runChoice{}, fmt.Errorf("service %s: no Machine holding it admits a one-off run (--machine picks another): %w", service, first)
}

// currentContainers narrows cs to the current deployment's Containers
// (current, else the newest Container's deployment), running ones first,
// then by Machine and name.
func currentContainers(cs []rpc.ContainerObservation, current string) []rpc.ContainerObservation {
	if len(cs) == 0 {
		return nil
	}
	if !slices.ContainsFunc(cs, func(c rpc.ContainerObservation) bool { return c.Deployment == current }) {
		newest := cs[0]
		for _, c := range cs[1:] {
			if c.CreatedAt > newest.CreatedAt {
				newest = c
			}
		}
		current = newest.Deployment
	}
	var out []rpc.ContainerObservation
	for _, c := range cs {
		if c.Deployment == current {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := deploy.Running(out[i]), deploy.Running(out[j])
		if ri != rj {
			return ri
		}
		return out[i].MachineID < out[j].MachineID || out[i].MachineID == out[j].MachineID && out[i].Name < out[j].Name
	})
	return out
}

// runMachine resolves --machine among the observed Machines.
func runMachine(snap deploy.Snapshot, ref string) (deploy.MachineState, error) {
	peers := make([]rpc.Peer, 0, len(snap.Machines))
	for _, m := range snap.Machines {
		peers = append(peers, rpc.Peer{ID: m.ID, Name: m.Name})
	}
	p, err := rpc.Resolve(peers, ref)
	if err != nil {
		return deploy.MachineState{}, fmt.Errorf("--machine: %w", err)
	}
	m, _ := snap.Machine(p.ID)
	if !m.Observed {
		reason := "it did not answer"
		for _, u := range snap.Missing {
			if u.MachineID == m.ID {
				reason = u.Reason
			}
		}
		return m, fmt.Errorf("--machine %s: not observed: %s", ref, reason)
	}
	return m, nil
}

// admitsRun reports why Machine m cannot run a one-off of from's spec:
// it lacks run_container, refuses it by its labels (drained, roles,
// constraints), or does not hold a volume the Service mounts there.
func admitsRun(m deploy.MachineState, from rpc.ContainerObservation, snap deploy.Snapshot) error {
	if !m.Observed {
		return errors.New("not observed")
	}
	if !slices.Contains(m.Capabilities, rpc.CapRunContainer) {
		return fmt.Errorf("its ployzd does not serve %s (capability %s): upgrade it (`ployz machine upgrade`)", rpc.CmdRunContainer, rpc.CapRunContainer)
	}
	if from.Spec == nil {
		return fmt.Errorf("Container %s has no spec label", from.Name)
	}
	if err := rpc.AdmitLabels(m.Name, m.Labels, *from.Spec); err != nil {
		return err
	}
	for _, mt := range from.Spec.Mounts {
		if err := holdsMount(m, mt, from.Service, snap); err != nil {
			return err
		}
	}
	return nil
}

// holdsMount reports why m does not hold the data mt mounts: a Docker
// volume it lacks, or a Provisioned Volume whose Writer is elsewhere. A
// one-off mounts the Service's data where it is, never an empty copy.
func holdsMount(m deploy.MachineState, mt rpc.MountSpec, service string, snap deploy.Snapshot) error {
	switch {
	case mt.Type == "volume" && mt.Source != "" && !slices.Contains(m.Volumes, mt.Source):
		return fmt.Errorf("it does not hold volume %s of service %s%s: a one-off runs where the Service's data is",
			mt.Source, service, heldOn(snap, func(o deploy.MachineState) bool { return slices.Contains(o.Volumes, mt.Source) }))
	case mt.Type == "bind":
		name, ok := volume.MountedVolume(mt.Source)
		if ok && name != "" && !slices.Contains(m.Writers, name) {
			return fmt.Errorf("its copy of Provisioned Volume %s of service %s is not the Writer%s: a one-off runs where the Writer is",
				name, service, heldOn(snap, func(o deploy.MachineState) bool { return slices.Contains(o.Writers, name) }))
		}
	}
	return nil
}

// heldOn names the Machines where has holds, as " (held on m1, m2)".
func heldOn(snap deploy.Snapshot, has func(deploy.MachineState) bool) string {
	var on []string
	for _, o := range snap.Machines {
		if has(o) {
			on = append(on, o.Name)
		}
	}
	if len(on) == 0 {
		return ""
	}
	return " (held on " + strings.Join(on, ", ") + ")"
}

// RunSpec is the spec of a one-off run of a Service Container's spec:
// its image, environment, shipped files, mounts, networks and host keys,
// with argv (when given) as the process, and nothing that makes it a
// replica: no ports, healthcheck, ingress or network aliases (names of
// serving Containers; a run never serves), never restarted, never
// waited ready, no spec hash. It keeps the networks, so it resolves the
// aliases the Service resolves.
func RunSpec(base rpc.ContainerSpec, argv []string) rpc.ContainerSpec {
	return deploy.RunSpec(base, argv)
}
