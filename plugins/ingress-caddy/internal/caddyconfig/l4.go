package caddyconfig

import (
	"net"
	"strconv"

	"github.com/ployz/ployz/sdk/ingress"
)

// layer4App is the Caddy layer4 app (github.com/mholt/caddy-l4) serving
// the tcp routes: one server per routed port, listening on that port with
// listen's host part, handing each connection to TCPHandler, which picks
// the upstream from the proxy's routing table (the first that answers:
// local Containers first, as ingress.Compute orders them). A pending
// route (no upstream) and a conflict without an owner get no listener:
// connections to their port are refused. nil when no tcp route has a
// listener.
func layer4App(listen string, routes []ingress.Route) obj {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = "" // ParseSpec checked listen; the routes still get every address
	}
	servers := obj{}
	for _, rt := range routes {
		if rt.Protocol != "tcp" || rt.Owner == "" || len(rt.Upstreams) == 0 || rt.Port < 1 || rt.Port > 65535 {
			continue
		}
		port := strconv.Itoa(rt.Port)
		servers["tcp_"+port] = obj{
			"listen": []string{net.JoinHostPort(host, port)},
			"routes": []any{obj{"handle": []any{obj{"handler": TCPHandler, "port": rt.Port}}}},
		}
	}
	if len(servers) == 0 {
		return nil
	}
	return obj{"servers": servers}
}
