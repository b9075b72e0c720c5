package dashboard

import (
	"sort"
	"strings"

	"github.com/ployz/ployz/sdk/ingress"
)

// CertSummary is one hostname's certificate across the Machines that
// answered: the Services list's Certificates cell.
type CertSummary struct {
	Hostname string `json:"hostname"`
	// State is issued (on every Machine serving HTTPS), pending, failed
	// (on any), off (no Machine serves HTTPS) or unknown (none answered).
	State string `json:"state"`
	// NotAfter is the earliest expiry of the issued material (unix s).
	NotAfter int64 `json:"not_after,omitempty"`
	// Detail names the Machines that differ and the last error.
	Detail string `json:"detail,omitempty"`
	// Source is "user" when a Machine serves an operator's certificate
	// (ployz cert add) for the hostname; absent: ACME.
	Source string `json:"source,omitempty"`
	// Warning says the certificate expired or expires within 21 days
	// (set by the source, which knows the time).
	Warning string `json:"warning,omitempty"`
}

// MachineCerts is one Machine's certificate states, or why it has none.
type MachineCerts struct {
	Machine string
	// HTTPS is false when the Machine's Ingress Proxy serves no HTTPS.
	HTTPS bool
	Certs []ingress.CertificateState
	Error string
}

// SummarizeCerts folds each Machine's state of hostname's certificate:
// failed beats pending beats issued, and the Machines that are not issued
// (or did not answer) are named.
func SummarizeCerts(hostname string, ms []MachineCerts) CertSummary {
	out := CertSummary{Hostname: hostname}
	by := map[string][]string{}
	var errs []string
	https := 0
	for _, m := range ms {
		if m.Error != "" {
			by["no answer"] = append(by["no answer"], m.Machine)
			continue
		}
		if !m.HTTPS {
			by["off"] = append(by["off"], m.Machine)
			continue
		}
		https++
		c := certFor(hostname, m.Certs)
		by[c.State] = append(by[c.State], m.Machine)
		if c.State == ingress.CertIssued && c.NotAfter > 0 && (out.NotAfter == 0 || c.NotAfter < out.NotAfter) {
			out.NotAfter = c.NotAfter
		}
		if c.State == ingress.CertIssued && c.Source != "" {
			out.Source = c.Source
		}
		if c.Error != "" {
			errs = append(errs, m.Machine+": "+c.Error)
		}
	}
	switch {
	case len(by[ingress.CertFailed]) > 0:
		out.State = ingress.CertFailed
	case len(by[ingress.CertPending]) > 0:
		out.State = ingress.CertPending
	case https > 0:
		out.State = ingress.CertIssued
	case len(by["off"]) > 0:
		out.State = "off"
	default:
		out.State = "unknown"
	}
	// Name every group of Machines but the one the state already says
	// for all of them.
	var parts []string
	for _, k := range []string{ingress.CertFailed, ingress.CertPending, ingress.CertIssued, "no answer", "off"} {
		if len(by[k]) == 0 || k == out.State && len(by[k]) == len(ms) {
			continue
		}
		sort.Strings(by[k])
		parts = append(parts, k+" on "+strings.Join(by[k], ", "))
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		parts = append(parts, "last error "+errs[0])
	}
	out.Detail = strings.Join(parts, "; ")
	return out
}

func certFor(hostname string, cs []ingress.CertificateState) ingress.CertificateState {
	for _, c := range cs {
		if c.Hostname == hostname {
			return c
		}
	}
	return ingress.CertificateState{Hostname: hostname, State: ingress.CertPending}
}
