package client

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
)

// Namespace is the namespace of the project a command acts on in env:
// named, else composePath's name:, else the only project with a Saved
// State (Session.ProjectName).
func (s *Session) Namespace(ctx context.Context, named, env, composePath string) (string, error) {
	p, err := s.ProjectName(ctx, named, env, composePath)
	if err != nil {
		return "", err
	}
	return deploy.Namespace(p, env), nil
}

// NamespaceOrAll is Namespace, or "" (every namespace) when all is set
// or no project is found: listings then show everything.
func (s *Session) NamespaceOrAll(ctx context.Context, named, env, composePath string, all bool) string {
	if all {
		return ""
	}
	ns, err := s.Namespace(ctx, named, env, composePath)
	if err != nil {
		return ""
	}
	return ns
}

// Services observes the Machines and lists ns's Services ("" every
// namespace): desired (from the saved states) against running and ready
// Containers. The snapshot names the Machines that did not answer.
func (s *Session) Services(ctx context.Context, ns string) ([]views.ServiceRow, deploy.Snapshot, error) {
	snap, err := deploy.Observe(ctx, s.ent, ns, false)
	if err != nil {
		return nil, snap, err
	}
	deploy.ObserveServing(ctx, s.ent, &snap) // only when a Machine is Down: what it holds
	return views.Services(snap, s.Declared(ctx), s.Removing(ctx), ns), snap, nil
}

// ContainerRow is one Service Container and the Machine running it.
type ContainerRow struct {
	Machine string `json:"machine"`
	// Down marks a Container that a Serving Pointer names on a Down
	// Machine: the Machine cannot be asked, so the row holds only what
	// the pointer knows (id, deployment, image id) and its state is
	// StateUnknown.
	Down bool `json:"down,omitempty"`
	rpc.ContainerObservation
}

// StateUnknown is the state of a Container on a Down Machine.
const StateUnknown = "unknown"

// Containers observes the Machines and lists ns's Service Containers
// ("" every namespace), only service's when it is set. The snapshot names
// the Machines that did not answer.
func (s *Session) Containers(ctx context.Context, ns, service string) ([]ContainerRow, deploy.Snapshot, error) {
	snap, err := deploy.Observe(ctx, s.ent, ns, false)
	if err != nil {
		return nil, snap, err
	}
	var out []ContainerRow
	for _, m := range snap.Machines {
		for _, co := range m.Containers {
			if service == "" || co.Service == service {
				out = append(out, ContainerRow{Machine: m.Name, ContainerObservation: co})
			}
		}
	}
	deploy.ObserveServing(ctx, s.ent, &snap) // only when a Machine is Down: what it holds
	return append(out, LostRows(snap, ns, service)...), snap, nil
}

// LostRows are the Containers the Serving Pointers of ns ("" every
// namespace) name on Down Machines, service's only when it is set, in
// Service then pointer order: they still count as the Service's replicas
// until a deploy replaces them, so a listing that left them out would
// hide what restore-replicas is for.
func LostRows(snap deploy.Snapshot, ns, service string) []ContainerRow {
	var out []ContainerRow
	for _, key := range slices.Sorted(maps.Keys(snap.Serving)) {
		sns, svc, _ := strings.Cut(key, "/")
		if (ns != "" && sns != ns) || (service != "" && svc != service) {
			continue
		}
		for _, c := range snap.LostReplicas(sns, svc) {
			out = append(out, ContainerRow{Machine: views.MachineName(snap, c.MachineID), Down: true, ContainerObservation: rpc.ContainerObservation{
				ID: c.ID, Name: shortID(c.ID, 12), MachineID: c.MachineID, Namespace: sns, Service: svc,
				Deployment: c.Deployment, ImageID: c.ImageID, State: StateUnknown}})
		}
	}
	return out
}
