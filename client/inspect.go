package client

import (
	"context"
	"slices"
	"sort"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/sdk/ingress"
)

// Inspection is one Service's account (`ployz service inspect`):
// execution and ingress status are separate facts: Containers can be
// ready while ingress is not configured, and the other way round.
type Inspection struct {
	Namespace string          `json:"namespace"`
	Service   string          `json:"service"`
	ServiceID string          `json:"service_id,omitempty"`
	Declared  *Declaration    `json:"declared,omitempty"`
	Execution ExecutionStatus `json:"execution"`
	Ingress   IngressStatus   `json:"ingress"`
	// Serving is the Service's Serving Pointer and each Machine's ack of
	// it, as the entry's store has them (absent: no pointer yet).
	Serving    *rpc.ServiceServing        `json:"serving,omitempty"`
	Containers []rpc.ContainerObservation `json:"containers"`
	Unobserved []deploy.Unobserved        `json:"unobserved,omitempty"`
	// Networks are the isolation networks the Service's Containers are
	// on (docs/security.md, "Namespace isolation"): its namespace's own
	// unless it declares compose networks.
	Networks []ServiceNetwork `json:"networks"`
}

// ServiceNetwork is one network a Service is on: who its Containers
// reach over it.
type ServiceNetwork struct {
	// Name is the isolation network: the namespace (its default
	// network), "<namespace>/<name>", or "external:<name>".
	Name string `json:"name"`
	// Namespaces whose declared Services are on it.
	Namespaces []string `json:"namespaces"`
	// Aliases are the Service's compose network aliases on it: names
	// Internal DNS answers only to Containers on this network.
	Aliases []string `json:"aliases,omitempty"`
}

// serviceNetworks are the networks of service in ns, with the namespaces
// that share each, as the latest Saved States declare them.
func serviceNetworks(declared map[string]map[string]deploy.Service, ns, service string) []ServiceNetwork {
	on := func(sv deploy.Service, svNS string) []string {
		if len(sv.Spec.Networks) == 0 {
			return []string{svNS}
		}
		return sv.Spec.Networks
	}
	mine := []string{ns}
	var aliases map[string][]string
	if sv, ok := declared[ns][service]; ok {
		mine, aliases = on(sv, ns), sv.Spec.Aliases
	}
	var out []ServiceNetwork
	for _, n := range mine {
		sn := ServiceNetwork{Name: n, Namespaces: []string{ns}, Aliases: aliases[n]}
		for otherNS, svcs := range declared {
			for _, sv := range svcs {
				if otherNS != ns && slices.Contains(on(sv, otherNS), n) && !slices.Contains(sn.Namespaces, otherNS) {
					sn.Namespaces = append(sn.Namespaces, otherNS)
				}
			}
		}
		sort.Strings(sn.Namespaces)
		out = append(out, sn)
	}
	return out
}

// Declaration is what the latest Saved State declares of a Service.
type Declaration struct {
	Mode      string `json:"mode"`
	Replicas  int    `json:"replicas"`
	Image     string `json:"image"`
	Readiness string `json:"readiness"`
}

// ExecutionStatus is a Service's Containers against its declaration.
type ExecutionStatus struct {
	// Status is ready (every desired Container ready), degraded (some
	// ready), not ready (running, none ready), stopped (nothing running),
	// or unknown (Machines unobserved and not enough ready).
	Status  string `json:"status"`
	Desired int    `json:"desired"`
	Running int    `json:"running"`
	Ready   int    `json:"ready"`
	// Restarts sums Docker's restarts of the Containers; NotReadyOn names
	// the Machines holding a Container that is not ready.
	Restarts   int      `json:"restarts"`
	NotReadyOn []string `json:"not_ready_on,omitempty"`
	// DownOn names the Down Machines holding Containers the Serving
	// Pointer names: unreachable, left out of DNS and ingress answers.
	DownOn []string `json:"down_on,omitempty"`
}

// InspectService is one Service of ns: execution and ingress status, the
// Serving Pointer and its acks. fanout reads every Machine's ingress
// (asked only when the Service has routes; nil: IngressFanout).
func (s *Session) InspectService(ctx context.Context, ns, service string, fanout func() ([]MachineIngress, error)) (Inspection, deploy.Snapshot, error) {
	if fanout == nil {
		fanout = func() ([]MachineIngress, error) { return IngressFanout(ctx, s.ent) }
	}
	snap, cs, err := s.ServiceContainers(ctx, ns, service)
	if err != nil {
		return Inspection{}, snap, err
	}
	in := Inspection{Namespace: ns, Service: service, Containers: cs, Unobserved: snap.Missing}
	declared := s.Declared(ctx)
	in.Networks = serviceNetworks(declared, ns, service)
	if sv, ok := declared[ns][service]; ok {
		in.Declared = &Declaration{Mode: sv.Mode, Replicas: sv.Replicas, Image: sv.Spec.Image, Readiness: sv.Spec.Readiness}
		in.Execution.Desired = sv.Replicas
		in.Ingress.Routes = sv.Ingress
	} else if len(cs) == 0 {
		return Inspection{}, snap, NoService(service, ns, snap)
	}
	in.Execution = execution(in.Execution.Desired, cs, snap)
	deploy.ObserveServing(ctx, s.ent, &snap) // only when a Machine is Down
	for _, c := range snap.LostReplicas(ns, service) {
		in.Execution.DownOn = append(in.Execution.DownOn, views.MachineName(snap, c.MachineID))
	}
	if in.Declared != nil && in.Declared.Mode == deploy.ModeGlobal {
		in.Execution.Desired = len(cs)
	}
	in.Execution.Status = deploy.ExecutionStatus(in.Execution.Desired, in.Execution.Running, in.Execution.Ready, snap.Complete())
	for _, co := range cs {
		in.ServiceID = co.ServiceID
	}
	if in.Ingress.Routes == nil {
		in.Ingress.Routes = ObservedRoutes(cs)
	}
	in.Ingress = IngressOf(ns, service, in.Ingress.Routes, fanout)
	var sst rpc.ServingStatus
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{Services: []string{ingress.ServiceKey(ns, service)}}, &sst); err == nil && len(sst.Services) == 1 && sst.Services[0].Pointer != "" {
		in.Serving = &sst.Services[0]
	}
	return in, snap, nil
}

// execution counts a Service's running and ready Containers.
func execution(desired int, cs []rpc.ContainerObservation, snap deploy.Snapshot) ExecutionStatus {
	e := ExecutionStatus{Desired: desired}
	for _, co := range cs {
		if co.State == "running" {
			e.Running++
		}
		if co.Ready {
			e.Ready++
		} else {
			e.NotReadyOn = append(e.NotReadyOn, views.MachineName(snap, co.MachineID))
		}
		e.Restarts += co.RestartCount
	}
	sort.Strings(e.NotReadyOn)
	e.NotReadyOn = slices.Compact(e.NotReadyOn)
	return e
}

// ObservedRoutes are the ingress routes of the first Container whose
// spec declares any (a Service no Saved State declares any more).
func ObservedRoutes(cs []rpc.ContainerObservation) []deploy.IngressRoute {
	var out []deploy.IngressRoute
	for _, co := range cs {
		if co.Spec != nil && len(co.Spec.Ingress) > 0 {
			for _, r := range co.Spec.Ingress {
				out = append(out, deploy.IngressRoute(r))
			}
			break
		}
	}
	return out
}
