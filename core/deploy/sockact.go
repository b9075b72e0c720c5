package deploy

import (
	"fmt"
	"slices"

	"github.com/ployz/ployz/core/rpc"
)

// xSocketActivation is the extension key: `x-socket-activation: true` on a
// Service that publishes one TCP host port. The Machine then listens on
// that port itself, keeps the socket across replacements and passes it to
// each Container as fd 3 with systemd's LISTEN_FDS protocol, so clients
// connecting during a redeploy wait in the accept queue instead of being
// refused (docs/compose.md, "x-socket-activation").
const xSocketActivation = "x-socket-activation"

// parseSocketActivation reads the extension's value: a boolean only.
func parseSocketActivation(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s: want true or false, not %v", xSocketActivation, v)
	}
	return b, nil
}

// applySocketActivation marks the Service's one TCP host port as socket
// activated. It runs after every port and route is known: the socket is a
// host port's, so a Service without exactly one TCP host port, or one
// reached through the Ingress Proxy (which dials the Container's own
// port), is refused naming the key.
func applySocketActivation(svc *Service, spec *rpc.ContainerSpec) error {
	if len(svc.Ingress) > 0 {
		r := svc.Ingress[0]
		return fmt.Errorf("%s: the Service has ingress route %s, which the Ingress Proxy serves by dialing the Container's own port; socket activation serves a host_port only", xSocketActivation, r.Key())
	}
	var tcp []int
	for i, p := range spec.Ports {
		if p.HostPort > 0 && (p.Protocol == "" || p.Protocol == "tcp") {
			tcp = append(tcp, i)
		}
	}
	switch len(tcp) {
	case 0:
		return fmt.Errorf("%s: the Service publishes no TCP host port (ports: \"8080:8080\" or x-ports host_port) to activate", xSocketActivation)
	case 1:
	default:
		var hps []int
		for _, i := range tcp {
			hps = append(hps, spec.Ports[i].HostPort)
		}
		return fmt.Errorf("%s: the Service publishes TCP host ports %s; socket activation passes one (LISTEN_FDS=1)", xSocketActivation, joinInts(hps))
	}
	spec.Ports[tcp[0]].SocketActivation = true
	return nil
}

// socketActivated reports whether svc passes a kept socket to its
// Containers.
func socketActivated(svc Service) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(p rpc.PortSpec) bool { return p.SocketActivation })
}

// clashingHostPorts are the host ports two Containers of svc cannot both
// hold: every published one but the socket-activated port, which the
// Machine holds and both share during a start-first replacement.
func clashingHostPorts(svc Service) []int {
	out := slices.Clone(svc.HostPorts)
	for _, p := range svc.Spec.Ports {
		if i := slices.Index(out, p.HostPort); p.SocketActivation && i >= 0 {
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// admitSocketActivation narrows ms, when svc is socket activated, to the
// Machines whose release passes the socket: an older one would publish
// the port through Docker and start the image without it.
func admitSocketActivation(svc Service, ms []MachineState) ([]MachineState, error) {
	if !socketActivated(svc) {
		return ms, nil
	}
	return admitCapable(ms, rpc.CapContainerSocketActivation, fmt.Sprintf("service %q declares %s, and no eligible Machine passes sockets to Containers", svc.Name, xSocketActivation))
}
