package client

import (
	"context"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
)

// Namespace is the namespace of the project a command acts on in env:
// named, else composePath's name:, else the context's only project with
// saved state (ProjectName).
func (s *Session) Namespace(ctx context.Context, named, env, composePath string) (string, error) {
	p, err := ProjectName(ctx, s.st, s.name, named, env, composePath)
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
	rpc.ContainerObservation
}

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
	return out, snap, nil
}
