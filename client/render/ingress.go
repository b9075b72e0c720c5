package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// IngressConfig is each Machine's loaded ingress routes: what its proxy
// loaded and when, what it refused or skipped, and each route's state.
func IngressConfig(out io.Writer, ms []client.MachineIngress) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, m := range ms {
		fmt.Fprintf(w, "machine %s (%s)\n", m.Machine, m.MachineID)
		switch {
		case m.Error != "":
			fmt.Fprintf(w, "  error\t%s\n", m.Error)
			continue
		case m.Status.Off:
			fmt.Fprintf(w, "  proxy\toff: this Machine does not accept ingress (nothing listens on 80 or 443)\n")
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
			fmt.Fprintf(w, "  %s%s\t%s\t%s\t%s\t%s%s%s\n", r.Key(), routeOptions(r.Options), r.Owner, r.State, ups, r.Detail, ptr, client.CertLine(st, r.Hostname))
		}
		for _, sk := range st.Skipped {
			fmt.Fprintf(w, "  skipped\t%s: %s\n", sk.Container, sk.Reason)
		}
		for _, sk := range st.SkippedCertificates {
			fmt.Fprintf(w, "  skipped certificate\t%s: %s\n", sk.Name, sk.Reason)
		}
	}
	return w.Flush()
}

// IngressDNS is the records to create for the routed hostnames, as a
// table, then the notes on what they cannot cover.
func IngressDNS(out io.Writer, d client.IngressDNS) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(d.Records) > 0 {
		fmt.Fprintln(w, "NAME\tTYPE\tVALUE\tMACHINE")
	}
	for _, r := range d.Records {
		note := ""
		if r.Private {
			note = "\t(a private address: use the one the Machine is reached at from the internet)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s%s\n", r.Name, r.Type, r.Value, r.Machine, note)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, n := range d.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	return nil
}

// routeOptions is a route's options after its key: " (strip prefix, no
// https redirect, body up to 10MiB, ...)", or nothing for a route without
// any.
func routeOptions(r routeopt.Options) string {
	var o []string
	if r.StripPrefix {
		o = append(o, "strip prefix")
	}
	if r.RedirectHTTPS != nil && !*r.RedirectHTTPS {
		o = append(o, "no https redirect")
	}
	if r.MaxBodyBytes > 0 {
		o = append(o, "body up to "+units.BytesSize(float64(r.MaxBodyBytes)))
	}
	if r.ResponseTimeoutMS > 0 {
		o = append(o, "response within "+(time.Duration(r.ResponseTimeoutMS)*time.Millisecond).String())
	}
	if r.Headers != nil {
		o = append(o, "header rules")
	}
	if r.Compress {
		o = append(o, "gzip")
	}
	if r.UpstreamProtocol != "" {
		o = append(o, "upstream "+r.UpstreamProtocol)
	}
	if r.RedirectTo != "" {
		o = append(o, "308 to "+r.RedirectTo)
	}
	if r.BasicAuth != nil {
		o = append(o, "basic auth ("+strings.Join(slices.Sorted(maps.Keys(r.BasicAuth.Users)), ", ")+")")
	}
	if len(o) == 0 {
		return ""
	}
	return " (" + strings.Join(o, ", ") + ")"
}
