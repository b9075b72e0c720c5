package containers

import (
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/rpc"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// ServiceRow is a Service Container's row (its store row, which the
// observe loop publishes) from its observation.
func ServiceRow(o rpc.ContainerObservation, in container.InspectResponse) sdkstore.ContainerBody {
	b := sdkstore.ContainerBody{Service: o.Service, Deployment: o.Deployment, Image: o.Image, State: o.State, IP: o.IP,
		Name: o.Name, Namespace: o.Namespace, ServiceID: o.ServiceID, SpecHash: o.SpecHash, ImageID: o.ImageID,
		Health: o.Health, Ready: o.Ready, CreatedAt: o.CreatedAt,
		RestartCount: o.RestartCount, ExitCode: o.ExitCode, OOMKilled: o.OOMKilled, FinishedAt: o.FinishedAt}
	if o.Spec != nil {
		b.Networks, b.Aliases = o.Spec.Networks, o.Spec.Aliases
		for _, r := range o.Spec.Ingress {
			b.Ingress = append(b.Ingress, sdkstore.IngressRoute(r)) // the same fields: a new one cannot be left behind
		}
	}
	if in.Config != nil {
		for _, kv := range in.Config.Env {
			k, _, _ := strings.Cut(kv, "=")
			b.EnvNames = append(b.EnvNames, k)
		}
		sort.Strings(b.EnvNames)
	}
	return b
}
