package client

import (
	"fmt"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// ExecTarget is the Container of service (in ns, observed as cs from
// snap) a command runs in: the first running one, or the running one
// named container (a name or an ID) when container is set.
func ExecTarget(service, ns string, snap deploy.Snapshot, cs []rpc.ContainerObservation, container string) (rpc.ContainerObservation, error) {
	for _, co := range cs {
		if container != "" && co.Name != container && co.ID != container {
			continue
		}
		if co.State == "running" {
			return co, nil
		}
	}
	if len(cs) == 0 {
		return rpc.ContainerObservation{}, NoService(service, ns, snap)
	}
	named := ""
	if container != "" {
		named = " named " + container
	}
	return rpc.ContainerObservation{}, fmt.Errorf("service %s in %s has no running Container%s", service, ns, named)
}
