package proxy

import (
	"fmt"
	"net"
	"strconv"

	"github.com/ployz/ployz/sdk/ingress"
)

// dropBusyPorts turns each tcp route whose port another process holds on
// this Machine into a pending route without a listener. Caddy refuses a
// whole config when one listener cannot bind, which would freeze every
// other route (and every Serving Pointer ack) on this Machine. Ports the
// loaded config already listens on (loaded) are ours and not probed.
func dropBusyPorts(routes []ingress.Route, listen string, loaded ingress.Routes) {
	host, _, _ := net.SplitHostPort(listen)
	ours := map[int]bool{}
	for _, r := range loaded.Routes {
		if r.Protocol == "tcp" && r.Owner != "" && len(r.Upstreams) > 0 {
			ours[r.Port] = true
		}
	}
	for i := range routes {
		r := &routes[i]
		if r.Protocol != "tcp" || r.Owner == "" || len(r.Upstreams) == 0 || ours[r.Port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(r.Port)))
		if err != nil {
			r.Upstreams, r.Containers = nil, nil
			r.State = ingress.RoutePending
			r.Detail = fmt.Sprintf("port %d is in use on this Machine, so no listener here: %v", r.Port, err)
			continue
		}
		l.Close()
	}
}
