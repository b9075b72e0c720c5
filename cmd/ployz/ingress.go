package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/rpc"
)

// machineIngress is one Machine's ingress_status answer, or why there is
// none.
type machineIngress struct {
	MachineID string             `json:"machine_id"`
	Machine   string             `json:"machine"`
	Status    *rpc.IngressStatus `json:"status,omitempty"`
	Error     string             `json:"error,omitempty"`
}

// ingressFanout asks every Machine for its loaded ingress routes.
func ingressFanout(ctx context.Context, ent *rpc.Client) ([]machineIngress, error) {
	fr, err := ent.Fanout(ctx, rpc.Target{All: true}, rpc.CmdIngressStatus, rpc.IngressStatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("ingress status: %w", err)
	}
	var out []machineIngress
	for _, a := range rpc.Answers[rpc.IngressStatus](fr, rpc.CmdIngressStatus) {
		out = append(out, machineIngress{MachineID: a.MachineID, Machine: a.Machine, Status: a.Value, Error: a.Error})
	}
	return out, nil
}

// machineRoutes is one Machine's view of a Service's hostnames.
type machineRoutes struct {
	MachineID string             `json:"machine_id"`
	Machine   string             `json:"machine"`
	Routes    []rpc.IngressState `json:"routes,omitempty"`
	Error     string             `json:"error,omitempty"`
}

// routeOfKey is the identity of the route a key names: "tcp/PORT" or a
// hostname (rpc.IngressState.Key).
func routeOfKey(k string) rpc.IngressState {
	if p, ok := strings.CutPrefix(k, "tcp/"); ok {
		if n, err := strconv.Atoi(p); err == nil {
			return rpc.IngressState{Protocol: "tcp", Port: n}
		}
	}
	return rpc.IngressState{Hostname: k}
}

// serviceIngress reduces every Machine's loaded routes to the Service's
// route keys (hostnames and "tcp/PORT"). A route a Machine has not loaded
// is pending there; one another Service owns is a conflict. The overall
// status is conflict when any Machine reports one, published when every
// Machine publishes every route for this Service, unknown when a Machine
// did not answer, else pending.
func serviceIngress(owner string, hostnames []string, ms []machineIngress) (string, []machineRoutes) {
	overall := rpc.RoutePublished
	worse := func(s string) {
		rank := map[string]int{rpc.RoutePublished: 0, rpc.RoutePending: 1, "unknown": 2, rpc.RouteConflict: 3}
		if rank[s] > rank[overall] {
			overall = s
		}
	}
	var out []machineRoutes
	for _, m := range ms {
		mr := machineRoutes{MachineID: m.MachineID, Machine: m.Machine, Error: m.Error}
		if m.Status == nil {
			worse("unknown")
			out = append(out, mr)
			continue
		}
		loaded := map[string]rpc.IngressState{}
		for _, r := range m.Status.Routes {
			loaded[r.Key()] = r
		}
		for _, h := range hostnames {
			r, ok := loaded[h]
			switch {
			case !m.Status.Running:
				r = routeOfKey(h)
				r.State, r.Detail = rpc.RoutePending, strings.TrimSuffix("the Ingress Proxy has loaded nothing on this Machine; "+m.Status.LoadError, "; ")
			case m.Status.Stale:
				r.State, r.Detail = "unknown", "the Ingress Proxy has not reported for over 30 s (is ployz-plugin@ingress-caddy.service running?)"
			case !ok:
				r = routeOfKey(h)
				r.State, r.Detail = rpc.RoutePending, "not in the loaded config yet"
			case r.Owner == "":
				// A conflict without a previous owner: nothing published.
			case r.Owner != owner:
				r.State, r.Detail = rpc.RouteConflict, "owned by "+r.Owner+"; "+r.Detail
			}
			worse(r.State)
			mr.Routes = append(mr.Routes, r)
		}
		out = append(out, mr)
	}
	return overall, out
}

func ingressCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ingress", Short: "Inspect the Ingress Proxies"}
	cmd.AddCommand(&cobra.Command{
		Use:   "config",
		Short: "Show each Machine's loaded ingress routes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withSession(c, func(s session) error {
				ms, err := ingressFanout(c.Context(), s.ent)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), ms)
				}
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				for _, m := range ms {
					fmt.Fprintf(w, "machine %s (%s)\n", m.Machine, m.MachineID)
					switch {
					case m.Error != "":
						fmt.Fprintf(w, "  error\t%s\n", m.Error)
						continue
					case !m.Status.Running && m.Status.LoadError != "":
						fmt.Fprintf(w, "  proxy\tnothing loaded: caddy refused the config: %s\n", m.Status.LoadError)
						continue
					case !m.Status.Running:
						fmt.Fprintf(w, "  proxy\tnot running (nothing loaded)\n")
						continue
					}
					st := m.Status
					tlsOn := ""
					if st.ListenTLS != "" {
						tlsOn = ", https " + st.ListenTLS
					}
					fmt.Fprintf(w, "  loaded\t%s, config %s, listen %s%s\n", time.Unix(st.Loaded, 0).UTC().Format(time.RFC3339), st.ConfigHash, st.Listen, tlsOn)
					if st.Stale {
						fmt.Fprintf(w, "  stale\tthe proxy has not reported for over 30 s; routes below are its last report\n")
					}
					if st.StoreError != "" {
						fmt.Fprintf(w, "  store\tunreachable, keeping the loaded config: %s\n", st.StoreError)
					}
					if st.LoadError != "" {
						fmt.Fprintf(w, "  caddy\trefused the newest config: %s\n", st.LoadError)
					}
					if len(st.Routes) == 0 {
						fmt.Fprintf(w, "  routes\tnone\n")
					}
					for _, r := range st.Routes {
						ups := strings.Join(r.Upstreams, ",")
						if ups == "" {
							ups = "-"
						}
						ptr := ""
						if r.Pointer != "" {
							ptr = " [serving pointer " + r.Pointer + "]"
						}
						fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s%s%s\n", r.Key(), r.Owner, r.State, ups, r.Detail, ptr, certLine(st, r.Hostname))
					}
					for _, sk := range st.Skipped {
						fmt.Fprintf(w, "  skipped\t%s: %s\n", sk.Container, sk.Reason)
					}
					for _, sk := range st.SkippedCertificates {
						fmt.Fprintf(w, "  skipped certificate\t%s: %s\n", sk.Name, sk.Reason)
					}
				}
				return w.Flush()
			})
		},
	})
	return cmd
}

// certLine is a route's HTTPS state for `ingress config`: the
// certificate's state (issued, pending, failed), expiry, issuer and last
// error; empty when HTTPS is off or the route has no hostname.
func certLine(st *rpc.IngressStatus, hostname string) string {
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
	return "\thttps " + rpc.CertPending
}
