package dns01

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/libdns/libdns"
	"github.com/miekg/dns"
)

// RFC2136 changes a zone with DNS UPDATE messages (RFC 2136) signed with
// a TSIG key (RFC 8945), sent over TCP to the zone's primary server.
// It implements libdns.RecordAppender and libdns.RecordDeleter for TXT
// records, which is what DNS-01 needs.
type RFC2136 struct {
	// Server is the primary's host:port.
	Server string
	// KeyName is the TSIG key's name (fully qualified); Algorithm one of
	// ingress.TSIGAlgorithms; Secret its base64 secret.
	KeyName, Algorithm, Secret string
}

var (
	_ libdns.RecordAppender = (*RFC2136)(nil)
	_ libdns.RecordDeleter  = (*RFC2136)(nil)
)

// AppendRecords adds recs to zone (existing records stay).
func (p *RFC2136) AppendRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	rrs, err := toRRs(zone, recs)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	m.Insert(rrs)
	if err := p.send(ctx, m); err != nil {
		return nil, err
	}
	return recs, nil
}

// DeleteRecords removes exactly recs (name, type and value) from zone.
func (p *RFC2136) DeleteRecords(ctx context.Context, zone string, recs []libdns.Record) ([]libdns.Record, error) {
	rrs, err := toRRs(zone, recs)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	m.Remove(rrs)
	if err := p.send(ctx, m); err != nil {
		return nil, err
	}
	return recs, nil
}

// send signs m, sends it and reads the server's verdict.
func (p *RFC2136) send(ctx context.Context, m *dns.Msg) error {
	key := dns.Fqdn(p.KeyName)
	alg := dns.Fqdn(p.Algorithm)
	m.SetTsig(key, alg, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 10 * time.Second, TsigSecret: map[string]string{key: p.Secret}}
	r, _, err := c.ExchangeContext(ctx, m, p.Server)
	if err != nil {
		if errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrKeyAlg) {
			return fmt.Errorf("update at %s refused: TSIG %v (check the key's name, algorithm and secret)", p.Server, err)
		}
		return fmt.Errorf("update at %s: %w", p.Server, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		why := dns.RcodeToString[r.Rcode]
		if t := r.IsTsig(); t != nil && t.Error != 0 {
			why += ", TSIG " + dns.RcodeToString[int(t.Error)]
		}
		return fmt.Errorf("update at %s refused: %s (check the key's name, algorithm and secret, and the zone's update-policy)", p.Server, why)
	}
	return nil
}

// toRRs turns libdns TXT records into DNS records of zone.
func toRRs(zone string, recs []libdns.Record) ([]dns.RR, error) {
	var out []dns.RR
	for _, rec := range recs {
		rr := rec.RR()
		if rr.Type != "TXT" {
			return nil, fmt.Errorf("rfc2136: only TXT records are supported here, not %s", rr.Type)
		}
		out = append(out, &dns.TXT{
			Hdr: dns.RR_Header{Name: libdns.AbsoluteName(rr.Name, dns.Fqdn(zone)), Rrtype: dns.TypeTXT, Class: dns.ClassINET,
				Ttl: uint32(rr.TTL / time.Second)},
			Txt: splitTXT(rr.Data),
		})
	}
	return out, nil
}

// splitTXT cuts a value into the 255-byte strings a TXT record holds.
func splitTXT(s string) []string {
	var parts []string
	for len(s) > 255 {
		parts = append(parts, s[:255])
		s = s[255:]
	}
	return append(parts, s)
}

// joinTXT is the value of a TXT record's strings.
func joinTXT(rr *dns.TXT) string { return strings.Join(rr.Txt, "") }
