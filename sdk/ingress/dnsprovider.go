package ingress

import (
	"encoding/base64"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DNS providers let the Ingress Proxy answer ACME DNS-01 challenges: it
// writes the _acme-challenge TXT record through the provider of the zone
// that covers a hostname, which is how a wildcard gets a certificate and
// how a Machine the CA cannot reach gets one. A provider is kept in the
// certificates table beside the certificates, under a row name that is
// never a hostname (an older proxy reads it as a row without material
// and ignores it), its secret settings sealed with the Cluster key.
const (
	// CertSourceDNSProvider marks a certificates row that holds a DNS
	// provider, not a certificate.
	CertSourceDNSProvider = "dns-provider"
	// DNSProviderPrefix starts a DNS provider's row name; the rest is its
	// name.
	DNSProviderPrefix = "dns-provider:"
	// DNSProviderSecretsPurpose derives the key sealing a provider's
	// secret settings (table "certificates", field DNSProviderSecretsField).
	DNSProviderSecretsPurpose = "dns-provider-secrets"
	// DNSProviderSecretsField names the sealed field in the associated
	// data: a sealed value opens only in its row and field.
	DNSProviderSecretsField = "dns_provider.secrets"
	// CapDNS01: obtains certificates with DNS-01 through the DNS providers
	// of the certificates table (wildcards included).
	CapDNS01 = "ployz.ingress.dns01.v1"
)

// DNSProvider is one provider as configured: Settings plain, Secrets
// never shown (sealed in the store).
type DNSProvider struct {
	// Name is the operator's name for it (the row name's suffix).
	Name string `json:"name"`
	// Provider is the libdns provider: one of DNSProviderKinds.
	Provider string `json:"provider"`
	// Zone is the DNS zone it changes, fully qualified, lower-case:
	// "example.com.". It covers the zone's names and their wildcards.
	Zone     string            `json:"zone"`
	Settings map[string]string `json:"settings,omitempty"`
	Secrets  map[string]string `json:"-"`
}

// DNSProviderKind describes a provider's settings: every one required
// unless it has a default.
type DNSProviderKind struct {
	Settings []string
	Secrets  []string
	Defaults map[string]string
	check    func(field, value string) (string, error)
}

// DNSProviderKinds are the providers this release implements. RFC 2136
// (DNS UPDATE signed with TSIG) is served by BIND, Knot, PowerDNS,
// Windows DNS and many appliances.
var DNSProviderKinds = map[string]DNSProviderKind{
	"rfc2136": {
		Settings: []string{"server", "tsig_key", "tsig_algorithm"},
		Secrets:  []string{"tsig_secret"},
		Defaults: map[string]string{"tsig_algorithm": "hmac-sha256"},
		check:    checkRFC2136,
	},
}

// TSIGAlgorithms are the TSIG algorithms rfc2136 accepts.
var TSIGAlgorithms = []string{"hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"}

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// DNSProviderRow is the certificates row name of provider name.
func DNSProviderRow(name string) string { return DNSProviderPrefix + name }

// DNSProviderFieldError is CheckDNSProvider's refusal: the field (a
// setting's name, or name, provider, zone) and why.
type DNSProviderFieldError struct {
	Field, Why string
}

// Flag is the `ployz cert dns-provider set` flag of the field.
func (e *DNSProviderFieldError) Flag() string { return "--" + strings.ReplaceAll(e.Field, "_", "-") }

func (e *DNSProviderFieldError) Error() string {
	return fmt.Sprintf("field %q (%s): %s", e.Field, e.Flag(), e.Why)
}

func dnsFieldErr(field, format string, a ...any) error {
	return &DNSProviderFieldError{Field: field, Why: fmt.Sprintf(format, a...)}
}

// CheckDNSProvider checks a provider and returns it normalised (zone
// fully qualified and lower-case, defaults filled, server with a port):
// every error names the field. Nothing about it is reached over the
// network here.
func CheckDNSProvider(p DNSProvider) (DNSProvider, error) {
	if !providerName.MatchString(p.Name) {
		return p, dnsFieldErr("name", "%q: want 1 to 63 lower-case letters, digits or '-', starting with a letter or digit", p.Name)
	}
	kind, ok := DNSProviderKinds[p.Provider]
	if !ok {
		return p, dnsFieldErr("provider", "%q: want one of %s", p.Provider, strings.Join(DNSProviderKindNames(), ", "))
	}
	zone, err := checkDomain(p.Zone)
	if err != nil {
		return p, dnsFieldErr("zone", "%v", err)
	}
	out := DNSProvider{Name: p.Name, Provider: p.Provider, Zone: zone, Settings: map[string]string{}, Secrets: map[string]string{}}
	for k := range p.Settings {
		if !slices.Contains(kind.Settings, k) {
			return p, dnsFieldErr(k, "%s takes no setting %q (settings: %s)", p.Provider, k, strings.Join(kind.Settings, ", "))
		}
	}
	for k := range p.Secrets {
		if !slices.Contains(kind.Secrets, k) {
			return p, dnsFieldErr(k, "%s takes no secret %q (secrets: %s)", p.Provider, k, strings.Join(kind.Secrets, ", "))
		}
	}
	for _, k := range kind.Settings {
		v, err := kind.value(k, p.Settings[k])
		if err != nil {
			return p, err
		}
		out.Settings[k] = v
	}
	for _, k := range kind.Secrets {
		v, err := kind.value(k, p.Secrets[k])
		if err != nil {
			return p, err
		}
		out.Secrets[k] = v
	}
	return out, nil
}

// value checks one setting, its default when it is empty.
func (k DNSProviderKind) value(field, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = k.Defaults[field]
	}
	if v == "" {
		return "", dnsFieldErr(field, "required")
	}
	if k.check != nil {
		return k.check(field, v)
	}
	return v, nil
}

func checkRFC2136(field, v string) (string, error) {
	switch field {
	case "server":
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			host, port = strings.Trim(v, "[]"), "53"
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", dnsFieldErr(field, "%q: want host or host:port, port 1 to 65535", v)
		}
		if host == "" || strings.ContainsAny(host, " /") {
			return "", dnsFieldErr(field, "%q: want host or host:port (the zone's primary server)", v)
		}
		return net.JoinHostPort(host, port), nil
	case "tsig_key":
		name, err := checkDomain(v)
		if err != nil {
			return "", dnsFieldErr(field, "%v (the TSIG key's name, as the server's configuration names it)", err)
		}
		return name, nil
	case "tsig_algorithm":
		a := strings.TrimSuffix(strings.ToLower(v), ".")
		if !slices.Contains(TSIGAlgorithms, a) {
			return "", dnsFieldErr(field, "%q: want one of %s", v, strings.Join(TSIGAlgorithms, ", "))
		}
		return a, nil
	case "tsig_secret":
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(b) == 0 {
			return "", dnsFieldErr(field, "not base64 (the key's secret as tsig-keygen prints it)")
		}
		return v, nil
	}
	return v, nil
}

// checkDomain returns a DNS name fully qualified and lower-case.
func checkDomain(v string) (string, error) {
	d := strings.ToLower(strings.TrimSpace(v))
	d = strings.TrimSuffix(d, ".")
	if d == "" {
		return "", fmt.Errorf("%q: want a DNS name such as example.com", v)
	}
	if len(d) > 253 {
		return "", fmt.Errorf("%q: longer than 253 characters", v)
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return "", fmt.Errorf("%q: label %q is not a DNS label", v, l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("%q: label %q is not a DNS label", v, l)
			}
		}
	}
	return d + ".", nil
}

// DNSProviderKindNames lists DNSProviderKinds, sorted.
func DNSProviderKindNames() []string {
	var ks []string
	for k := range DNSProviderKinds {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Covers reports whether hostname (a wildcard's base) lies in the zone.
func (p DNSProvider) Covers(hostname string) bool {
	h := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(hostname, "*."), ".")) + "."
	return h == p.Zone || strings.HasSuffix(h, "."+p.Zone)
}

// DNSProviderFor is the provider whose zone covers hostname, the
// longest zone when several do (a delegated sub-zone wins), then the
// first name.
func DNSProviderFor(ps []DNSProvider, hostname string) (DNSProvider, bool) {
	var best DNSProvider
	found := false
	for _, p := range ps {
		if !p.Covers(hostname) {
			continue
		}
		if !found || len(p.Zone) > len(best.Zone) || len(p.Zone) == len(best.Zone) && p.Name < best.Name {
			best, found = p, true
		}
	}
	return best, found
}
