package ingress

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// Route is one hostname as this Machine's Ingress Proxy serves it.
type Route = rpc.IngressState

// Routes is one computation from the Containers table: the routes sorted
// by hostname and the row routes that were skipped.
type Routes struct {
	Routes  []Route
	Skipped []rpc.SkippedRoute
}

// Owners maps each hostname to the Service ("namespace/service") that owned
// it in the previous computation; a conflict keeps that owner.
func (r Routes) Owners() map[string]string {
	m := make(map[string]string, len(r.Routes))
	for _, rt := range r.Routes {
		m[rt.Hostname] = rt.Owner
	}
	return m
}

type upstream struct {
	addr  netip.AddrPort
	local bool
}

// Compute derives the routes from the Containers table.
//
// Every Service whose rows carry a hostname route claims that hostname
// (whether or not its Containers are ready). One Service owns a hostname:
// with one claimant that one; with several it is a conflict, reported as
// such, and the owner stays prev's owner when it still claims the
// hostname, else the lowest "namespace/service". Upstreams are the owner's
// Containers whose row is Ready with an IPv4 address, at ip:container_port
// of their own spec, this Machine's (machine) first, then by address. An
// owner without one is pending. Rows whose routes are invalid are skipped
// and reported with the offending field.
func Compute(rows []store.Row[store.ContainerBody], machine string, prev map[string]string) Routes {
	var out Routes
	claims := map[string]map[string]bool{}    // hostname -> set of services
	ups := map[string]map[string][]upstream{} // hostname -> service -> upstreams
	machine = strings.ToLower(machine)
	for _, r := range rows {
		b := r.Body
		if len(b.Ingress) == 0 {
			continue
		}
		if b.Namespace == "" || b.Service == "" {
			out.Skipped = append(out.Skipped, rpc.SkippedRoute{Container: r.Key,
				Reason: `field "namespace"/"service" is empty: routes need the Service's identity`})
			continue
		}
		svc := strings.ToLower(b.Namespace) + "/" + strings.ToLower(b.Service)
		var ip netip.Addr
		if b.Ready {
			if a, err := netip.ParseAddr(b.IP); err == nil && a.Unmap().Is4() {
				ip = a.Unmap()
			}
		}
		for i, rt := range b.Ingress {
			h := strings.ToLower(strings.TrimSuffix(rt.Hostname, "."))
			if err := rpc.ValidHostname(h); err != nil {
				out.Skipped = append(out.Skipped, rpc.SkippedRoute{Container: r.Key,
					Reason: fmt.Sprintf("field \"ingress[%d].hostname\" %s", i, err)})
				continue
			}
			if rt.ContainerPort < 1 || rt.ContainerPort > 65535 {
				out.Skipped = append(out.Skipped, rpc.SkippedRoute{Container: r.Key,
					Reason: fmt.Sprintf("field \"ingress[%d].container_port\" is %d, want 1-65535", i, rt.ContainerPort)})
				continue
			}
			if claims[h] == nil {
				claims[h] = map[string]bool{}
				ups[h] = map[string][]upstream{}
			}
			claims[h][svc] = true
			if ip.IsValid() {
				ups[h][svc] = append(ups[h][svc], upstream{addr: netip.AddrPortFrom(ip, uint16(rt.ContainerPort)),
					local: strings.EqualFold(r.Owner, machine)})
			}
		}
	}
	for h, set := range claims {
		claimants := make([]string, 0, len(set))
		for s := range set {
			claimants = append(claimants, s)
		}
		slices.Sort(claimants)
		owner := claimants[0]
		if p := prev[h]; p != "" && set[p] {
			owner = p
		}
		rt := Route{Hostname: h, Owner: owner}
		us := ups[h][owner]
		slices.SortFunc(us, func(a, b upstream) int {
			if a.local != b.local {
				if a.local {
					return -1
				}
				return 1
			}
			return a.addr.Compare(b.addr)
		})
		us = slices.CompactFunc(us, func(a, b upstream) bool { return a.addr == b.addr })
		for _, u := range us {
			rt.Upstreams = append(rt.Upstreams, u.addr.String())
		}
		switch {
		case len(claimants) > 1:
			rt.State, rt.Claimants = rpc.RouteConflict, claimants
			rt.Detail = "claimed by " + strings.Join(claimants, ", ") + "; serving " + owner
		case len(rt.Upstreams) == 0:
			rt.State, rt.Detail = rpc.RoutePending, "no ready Container: answering 502"
		default:
			rt.State = rpc.RoutePublished
		}
		out.Routes = append(out.Routes, rt)
	}
	slices.SortFunc(out.Routes, func(a, b Route) int { return strings.Compare(a.Hostname, b.Hostname) })
	return out
}
