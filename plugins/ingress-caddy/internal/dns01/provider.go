package dns01

import (
	"context"
	"fmt"
	"time"

	"github.com/libdns/libdns"

	"github.com/ployz/ployz/sdk/ingress"
)

// Provider adds and removes records in a zone: the two libdns
// interfaces DNS-01 needs.
type Provider interface {
	libdns.RecordAppender
	libdns.RecordDeleter
}

// Solver is a configured provider: the records it changes and the
// servers that answer authoritatively for its zone.
type Solver struct {
	Config ingress.DNSProvider
	Provider
	// Authoritative are the servers (host:port) queried until the record
	// shows: the zone's primary for rfc2136.
	Authoritative []string
}

// New returns the Solver of a checked configuration
// (ingress.CheckDNSProvider). Adding a libdns provider is one more case
// here and one more entry in ingress.DNSProviderKinds.
func New(p ingress.DNSProvider) (*Solver, error) {
	switch p.Provider {
	case "rfc2136":
		r := &RFC2136{Server: p.Settings["server"], KeyName: p.Settings["tsig_key"],
			Algorithm: p.Settings["tsig_algorithm"], Secret: p.Secrets["tsig_secret"]}
		return &Solver{Config: p, Provider: r, Authoritative: []string{r.Server}}, nil
	}
	return nil, fmt.Errorf("dns provider %q: provider %q is not implemented in this release", p.Name, p.Provider)
}

// String names the provider in errors and logs.
func (s *Solver) String() string {
	return fmt.Sprintf("DNS provider %q (%s, zone %s)", s.Config.Name, s.Config.Provider, s.Config.Zone)
}

// Present adds the TXT record value at fqdn (the _acme-challenge name)
// and returns the record to Clean up with.
func (s *Solver) Present(ctx context.Context, fqdn, value string) (libdns.Record, error) {
	rec := libdns.TXT{Name: libdns.RelativeName(fqdn, s.Config.Zone), TTL: 60 * time.Second, Text: value}
	if _, err := s.AppendRecords(ctx, s.Config.Zone, []libdns.Record{rec}); err != nil {
		return nil, fmt.Errorf("%s: add TXT %s: %w", s, fqdn, err)
	}
	return rec, nil
}

// Clean removes a record Present added.
func (s *Solver) Clean(ctx context.Context, rec libdns.Record) error {
	if _, err := s.DeleteRecords(ctx, s.Config.Zone, []libdns.Record{rec}); err != nil {
		return fmt.Errorf("%s: remove TXT %s: %w", s, libdns.AbsoluteName(rec.RR().Name, s.Config.Zone), err)
	}
	return nil
}
