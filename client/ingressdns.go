package client

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// IngressDNS is what an operator creates at their DNS provider so every
// routed hostname reaches the Machines that run ingress: one A (or AAAA)
// record per hostname and ingress Machine address. Ployz serves no public
// DNS itself; these are the records to create.
type IngressDNS struct {
	// Records are sorted by hostname, then Machine.
	Records []DNSRecord `json:"records"`
	// Machines are the participating Machines that accept ingress, with
	// the addresses their records point at.
	Machines []IngressMachine `json:"machines"`
	// Notes say what the records cannot cover: Machines without a known
	// address, hostnames no Machine could be asked about.
	Notes []string `json:"notes,omitempty"`
}

// DNSRecord is one record: Name (a hostname, or a wildcard such as
// *.example.com, as routed) of Type A or AAAA pointing at Value, an
// address of Machine.
type DNSRecord struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Value   string `json:"value"`
	Machine string `json:"machine"`
	// Private: Value is not reachable from the internet (RFC 1918,
	// unique local, CGNAT); a public record needs the address the
	// Machine is reached at from outside instead.
	Private bool `json:"private,omitempty"`
}

// IngressMachine is a Machine that runs ingress and the addresses it
// advertises (its WireGuard endpoints' hosts).
type IngressMachine struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
}

// IngressDNS lists the DNS records the Cluster's routed hostnames need:
// hostnames from every Machine's loaded routes, addresses from the
// Machines that accept ingress.
func (s *Session) IngressDNS(ctx context.Context) (IngressDNS, error) {
	list, err := s.Machines(ctx)
	if err != nil {
		return IngressDNS{}, err
	}
	s.discoveredEndpoints(ctx, list.Machines)
	ms, err := IngressFanout(ctx, s.ent)
	if err != nil {
		return IngressDNS{}, err
	}
	return IngressDNSOf(list, ms), nil
}

// discoveredEndpoints fills in the endpoints of ingress Machines whose
// row has none (a Cluster's founding Machine publishes none) with those
// the Machine discovers itself (inspect); one that does not answer keeps
// none, and IngressDNSOf notes it.
func (s *Session) discoveredEndpoints(ctx context.Context, ms []rpc.MachineView) {
	for i, m := range ms {
		if len(m.Endpoints) > 0 || m.Phase != string(machine.Participating) || !rpc.Accepts(m.Labels, rpc.AcceptIngress) {
			continue
		}
		var in rpc.Inspection
		if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: m.ID}, rpc.Inspect, rpc.None{}, &in); err == nil {
			ms[i].Endpoints = in.Endpoints
		}
	}
}

// IngressDNSOf derives the records from a Machine list and the Machines'
// ingress status answers.
func IngressDNSOf(list rpc.MachineList, ms []MachineIngress) IngressDNS {
	out := IngressDNS{Records: []DNSRecord{}, Machines: []IngressMachine{}}
	for _, m := range list.Machines {
		if m.Phase != string(machine.Participating) || !rpc.Accepts(m.Labels, rpc.AcceptIngress) {
			continue
		}
		im := IngressMachine{ID: m.ID, Name: m.Name, Addresses: endpointHosts(m.Endpoints)}
		if len(im.Addresses) == 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("%s accepts ingress but advertises no address: point its records at the address it is reached at", m.Name))
		}
		out.Machines = append(out.Machines, im)
	}
	slices.SortFunc(out.Machines, func(a, b IngressMachine) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	if len(out.Machines) == 0 {
		out.Notes = append(out.Notes, "no participating Machine accepts ingress (`ployz machine update NAME --accepts ...,ingress`)")
	}
	hosts := routedHostnames(ms, &out.Notes)
	for _, h := range hosts {
		for _, im := range out.Machines {
			for _, a := range im.Addresses {
				ip := netip.MustParseAddr(a)
				typ := "A"
				if ip.Is6() {
					typ = "AAAA"
				}
				out.Records = append(out.Records, DNSRecord{Name: h, Type: typ, Value: a, Machine: im.Name, Private: !publicAddr(ip)})
			}
		}
	}
	if len(hosts) == 0 {
		out.Notes = append(out.Notes, "no hostname is routed yet: deploy a Service with an x-ports hostname")
	}
	return out
}

// routedHostnames are the HTTP hostnames in the Machines' loaded routes,
// sorted; a Machine that did not answer adds a note.
func routedHostnames(ms []MachineIngress, notes *[]string) []string {
	var hosts []string
	for _, m := range ms {
		if m.Status == nil {
			*notes = append(*notes, fmt.Sprintf("%s did not answer (%s): a hostname only it routes is missing", m.Machine, m.Error))
			continue
		}
		for _, r := range m.Status.Routes {
			if r.Protocol == "" && r.Hostname != "" {
				hosts = append(hosts, r.Hostname)
			}
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// endpointHosts are the distinct addresses of WireGuard endpoints
// ("host:port"), in order.
func endpointHosts(eps []string) []string {
	var out []string
	for _, e := range eps {
		ap, err := netip.ParseAddrPort(e)
		if err != nil {
			continue
		}
		a := ap.Addr().Unmap().String()
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// cgnat is RFC 6598's shared address space, private to a carrier.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// publicAddr reports whether a is reachable from the internet as far as
// its range says.
func publicAddr(a netip.Addr) bool {
	return a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a)
}
