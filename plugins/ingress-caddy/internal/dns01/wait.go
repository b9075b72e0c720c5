package dns01

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// WaitTXT waits until every server answers value among fqdn's TXT
// records (asked without recursion, so a server answers from its own
// zone), polling every interval until ctx ends. The error names the
// server that still did not and what it answered.
func WaitTXT(ctx context.Context, servers []string, fqdn, value string, interval time.Duration) error {
	for _, srv := range servers {
		var last string
		for {
			found, seen, err := hasTXT(ctx, srv, fqdn, value)
			if err != nil {
				last = err.Error()
			} else {
				last = "TXT " + seen
			}
			if found {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not answer the TXT record at %s in time (last answer: %s)", srv, fqdn, last)
			case <-time.After(interval):
			}
		}
	}
	return nil
}

// hasTXT asks srv for fqdn's TXT records.
func hasTXT(ctx context.Context, srv, fqdn, value string) (bool, string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(fqdn), dns.TypeTXT)
	m.RecursionDesired = false
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	r, _, err := c.ExchangeContext(ctx, m, srv)
	if err != nil {
		return false, "", err
	}
	if r.Rcode != dns.RcodeSuccess {
		return false, dns.RcodeToString[r.Rcode], nil
	}
	var vals []string
	for _, rr := range r.Answer {
		if t, ok := rr.(*dns.TXT); ok {
			if joinTXT(t) == value {
				return true, "", nil
			}
			vals = append(vals, fmt.Sprintf("%q", joinTXT(t)))
		}
	}
	if len(vals) == 0 {
		return false, "none", nil
	}
	return false, strings.Join(vals, " "), nil
}
