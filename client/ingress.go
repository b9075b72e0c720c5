package client

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// IngressStatus is a Service's ingress half: published (every Machine's
// proxy routes every hostname to this Service's ready Containers), pending,
// conflict, unknown (a Machine did not answer) or not configured (no
// hostname routes), with each Machine's view.
type IngressStatus struct {
	Status   string                `json:"status"`
	Routes   []deploy.IngressRoute `json:"routes,omitempty"`
	Reason   string                `json:"reason,omitempty"`
	Machines []MachineRoutes       `json:"machines,omitempty"`
}

// IngressOf is a Service's ingress status for routes (basic
// authentication's user names shown without their hashes); fanout (asked
// only when there are routes) reads every Machine's proxy.
func IngressOf(ns, service string, routes []deploy.IngressRoute, fanout func() ([]MachineIngress, error)) IngressStatus {
	st := IngressStatus{Routes: slices.Clone(routes)}
	for i := range st.Routes {
		st.Routes[i].BasicAuth = st.Routes[i].BasicAuth.Redacted()
	}
	if len(routes) == 0 {
		st.Status, st.Reason = "not configured", "the Service declares no x-ports hostname or ingress_port"
		return st
	}
	var hosts []string
	for _, r := range routes {
		hosts = append(hosts, r.Key())
	}
	ms, err := fanout()
	if err != nil {
		st.Status, st.Reason = "unknown", err.Error()
		return st
	}
	st.Status, st.Machines = ServiceIngress(ingress.ServiceKey(ns, service), hosts, ms)
	if !slices.ContainsFunc(st.Machines, func(m MachineRoutes) bool { return !m.Off }) {
		st.Reason = "no Machine accepts ingress (`ployz machine update NAME --accepts ...,ingress`)"
	}
	return st
}

// MachineIngress is one Machine's ingress_status answer, or why there is
// none.
type MachineIngress struct {
	MachineID string          `json:"machine_id"`
	Machine   string          `json:"machine"`
	Status    *ingress.Status `json:"status,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// IngressFanout asks every Machine for its loaded ingress routes.
func IngressFanout(ctx context.Context, ent *rpc.Client) ([]MachineIngress, error) {
	return IngressOn(ctx, ent, rpc.Target{All: true})
}

// IngressOn is IngressFanout for the Machines t names.
func IngressOn(ctx context.Context, ent *rpc.Client, t rpc.Target) ([]MachineIngress, error) {
	answers, err := rpc.InvokeAll(ctx, ent, t, rpc.ReadIngressStatus, rpc.IngressStatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("ingress status: %w", err)
	}
	var out []MachineIngress
	for _, a := range answers {
		out = append(out, MachineIngress{MachineID: a.MachineID, Machine: a.Machine, Status: a.Value, Error: a.Error})
	}
	return out, nil
}

// MachineRoutes is one Machine's view of a Service's hostnames. Off: the
// Machine does not accept ingress, so it serves none of them and counts
// for nothing in the Service's status.
type MachineRoutes struct {
	MachineID string          `json:"machine_id"`
	Machine   string          `json:"machine"`
	Off       bool            `json:"off,omitempty"`
	Routes    []ingress.Route `json:"routes,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// routeOfKey is the identity of the route a key names: "tcp/PORT" or a
// hostname and its path, if any (ingress.Route.Key).
func routeOfKey(k string) ingress.Route {
	if p, ok := strings.CutPrefix(k, "tcp/"); ok {
		if n, err := strconv.Atoi(p); err == nil {
			return ingress.Route{Protocol: "tcp", Port: n}
		}
	}
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return ingress.Route{Hostname: k[:i], Path: k[i:]}
	}
	return ingress.Route{Hostname: k}
}

// ServiceIngress reduces every Machine's loaded routes to the Service's
// route keys (hostnames, hostname/path and "tcp/PORT"). A route a Machine
// has not loaded is pending there; one another Service owns is a
// conflict; a Machine that does not accept ingress is left out. The
// overall status is conflict when any Machine reports one, published when
// every Machine running ingress publishes every route for this Service,
// unknown when a Machine did not answer, else pending (also when no
// Machine runs ingress).
func ServiceIngress(owner string, hostnames []string, ms []MachineIngress) (string, []MachineRoutes) {
	overall := ingress.RoutePublished
	worse := func(s string) {
		rank := map[string]int{ingress.RoutePublished: 0, ingress.RoutePending: 1, "unknown": 2, ingress.RouteConflict: 3}
		if rank[s] > rank[overall] {
			overall = s
		}
	}
	var out []MachineRoutes
	serving := 0
	for _, m := range ms {
		mr := MachineRoutes{MachineID: m.MachineID, Machine: m.Machine, Error: m.Error}
		if m.Status != nil && m.Status.Off {
			mr.Off = true
			out = append(out, mr)
			continue
		}
		serving++
		if m.Status == nil {
			worse("unknown")
			out = append(out, mr)
			continue
		}
		loaded := map[string]ingress.Route{}
		for _, r := range m.Status.Routes {
			loaded[r.Key()] = r
		}
		for _, h := range hostnames {
			r, ok := loaded[h]
			switch {
			case !m.Status.Running:
				r = routeOfKey(h)
				r.State, r.Detail = ingress.RoutePending, strings.TrimSuffix("the Ingress Proxy has loaded nothing on this Machine; "+m.Status.LoadError, "; ")
			case m.Status.Stale:
				r.State, r.Detail = "unknown", "the Ingress Proxy has not reported for over 30 s (is ployz-plugin@ingress-caddy.service running?)"
			case !ok:
				r = routeOfKey(h)
				r.State, r.Detail = ingress.RoutePending, "not in the loaded config yet"
			case r.Owner == "":
				// A conflict without a previous owner: nothing published.
			case r.Owner != owner:
				r.State, r.Detail = ingress.RouteConflict, "owned by "+r.Owner+"; "+r.Detail
			}
			worse(r.State)
			mr.Routes = append(mr.Routes, r)
		}
		out = append(out, mr)
	}
	if serving == 0 {
		overall = ingress.RoutePending
	}
	return overall, out
}

// CertLine is a route's HTTPS state for `ingress config`: the
// certificate's state (issued, pending, failed), expiry, issuer and last
// error; empty when HTTPS is off or the route has no hostname.
func CertLine(st *ingress.Status, hostname string) string {
	if hostname == "" || st.ListenTLS == "" {
		return ""
	}
	for _, c := range st.Certificates {
		if c.Hostname != hostname {
			continue
		}
		out := "\thttps " + c.State
		if c.NotAfter > 0 {
			out += " until " + time.Unix(c.NotAfter, 0).UTC().Format(time.RFC3339)
		}
		if c.Issuer != "" {
			out += " by " + c.Issuer
		}
		if c.Error != "" {
			out += "; last attempt failed: " + c.Error
			if c.NextAttemptAt > 0 {
				out += "; next " + time.Unix(c.NextAttemptAt, 0).UTC().Format(time.RFC3339)
			}
		}
		if c.Detail != "" {
			out += "; " + c.Detail
		}
		return out
	}
	return "\thttps " + ingress.CertPending
}
