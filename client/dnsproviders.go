package client

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// DNSProvider is one DNS provider as operators see it (secrets named,
// never shown), with notes (set) naming the ingress Machines that will
// not use it.
type DNSProvider struct {
	rpc.DNSProviderView
	Notes []string `json:"notes,omitempty"`
}

// DNSProviders answers `ployz cert dns-provider ls`.
type DNSProviders struct {
	Providers []DNSProvider `json:"providers"`
}

// SetDNSProviderRequest is what `ployz cert dns-provider set` gives:
// Settings plain, Secrets sealed by the entry.
type SetDNSProviderRequest = rpc.SetDNSProviderRequest

// ReadSecretFile reads a secret setting's value from a file (the
// first line, trimmed), so it stays out of the shell's history; the
// error names the flag.
func ReadSecretFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return line, nil
}

// DNSProviderInput is what an operator gives `ployz cert dns-provider
// set` for an rfc2136 provider: its settings by name, its TSIG secret
// inline or in a file (the first line), never both.
type DNSProviderInput struct {
	Provider, Zone                 string
	Server, TSIGKey, TSIGAlgorithm string
	TSIGSecret, TSIGSecretFile     string
}

// Request is the provider name from in, checked here (CheckDNSProvider):
// a setting not given is left out, so it takes its default; the error
// names the field and its flag.
func (in DNSProviderInput) Request(name string) (SetDNSProviderRequest, error) {
	secret := in.TSIGSecret
	if in.TSIGSecretFile != "" {
		if secret != "" {
			return SetDNSProviderRequest{}, fmt.Errorf("--tsig-secret and --tsig-secret-file: give one")
		}
		v, err := ReadSecretFile("--tsig-secret-file", in.TSIGSecretFile)
		if err != nil {
			return SetDNSProviderRequest{}, err
		}
		secret = v
	}
	req := SetDNSProviderRequest{Name: name, Provider: in.Provider, Zone: in.Zone,
		Settings: nonEmpty(map[string]string{"server": in.Server, "tsig_key": in.TSIGKey, "tsig_algorithm": in.TSIGAlgorithm}),
		Secrets:  nonEmpty(map[string]string{"tsig_secret": secret})}
	return req, CheckDNSProvider(req)
}

// nonEmpty drops the empty values.
func nonEmpty(m map[string]string) map[string]string {
	maps.DeleteFunc(m, func(_, v string) bool { return v == "" })
	return m
}

// CheckDNSProvider is SetDNSProvider's check, needing no Cluster: the
// error names the field and its flag.
func CheckDNSProvider(req SetDNSProviderRequest) error {
	if _, err := ingress.CheckDNSProvider(ingress.DNSProvider{Name: req.Name, Provider: req.Provider, Zone: req.Zone,
		Settings: req.Settings, Secrets: req.Secrets}); err != nil {
		return fmt.Errorf("DNS provider refused: %w", err)
	}
	return nil
}

// SetDNSProvider checks the provider here (refusing, naming the field
// and its flag, what does not check) and has the entry store it, its
// secrets sealed with the Cluster key; setting a name again replaces it.
// Nothing is stored on a refusal.
func (s *Session) SetDNSProvider(ctx context.Context, req SetDNSProviderRequest) (DNSProvider, error) {
	if err := CheckDNSProvider(req); err != nil {
		return DNSProvider{}, err
	}
	var v rpc.DNSProviderView
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.SetDNSProvider, req, &v); err != nil {
		return DNSProvider{}, fmt.Errorf("set DNS provider: %w", err)
	}
	p := DNSProvider{DNSProviderView: v}
	if list, err := s.Machines(ctx); err == nil {
		p.Notes = dns01Notes(list.Machines)
	}
	return p, nil
}

// dns01Notes names the participating ingress Machines whose proxy does
// not advertise ingress.CapDNS01: they keep HTTP-01 and issue no
// wildcard.
func dns01Notes(ms []rpc.MachineView) []string {
	var notes []string
	for _, m := range ms {
		if m.Phase != "participating" || !rpc.Accepts(m.Labels, rpc.AcceptIngress) || !slices.Contains(m.Capabilities, ingress.CapHTTP) {
			continue
		}
		if !slices.Contains(m.Capabilities, ingress.CapDNS01) {
			notes = append(notes, fmt.Sprintf("machine %s does not use DNS providers (no %s: an older release, or HTTPS or cluster_secret_file off there)", m.Name, ingress.CapDNS01))
		}
	}
	return notes
}

// DNSProviders lists the Cluster's DNS providers.
func (s *Session) DNSProviders(ctx context.Context) (DNSProviders, error) {
	var list rpc.DNSProviderList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListDNSProviders, rpc.None{}, &list); err != nil {
		return DNSProviders{}, fmt.Errorf("list DNS providers: %w", err)
	}
	out := DNSProviders{Providers: make([]DNSProvider, 0, len(list.Providers))}
	for _, v := range list.Providers {
		out.Providers = append(out.Providers, DNSProvider{DNSProviderView: v})
	}
	return out, nil
}

// RemoveDNSProvider removes the provider name: the names of its zone go
// back to HTTP-01, its wildcards get no new certificate.
func (s *Session) RemoveDNSProvider(ctx context.Context, name string) (DNSProvider, error) {
	var v rpc.DNSProviderView
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.RemoveDNSProvider, rpc.RemoveDNSProviderRequest{Name: name}, &v); err != nil {
		return DNSProvider{}, fmt.Errorf("remove DNS provider: %w", err)
	}
	return DNSProvider{DNSProviderView: v}, nil
}
