package dns

import (
	"net/netip"
	"strings"
)

// Zone is the suffix Internal DNS is authoritative for.
const Zone = "internal."

// reverseZone is the IPv4 reverse zone: PTR names for Container addresses.
const reverseZone = ".in-addr.arpa."

// NameKind says which form an internal name has.
type NameKind int

// The name forms Internal DNS answers.
const (
	NameExternal NameKind = iota // not under .internal: forwarded
	NameUnknown                  // under .internal but no known form: NXDOMAIN
	NameService                  // <service>.<namespace>.internal
	NameNearest                  // <service>.<namespace>.nearest.internal
	NameMachine                  // <service>.<namespace>.<machine-id>.machine.internal
	NameID                       // <service-id>.id.lookup.internal
	NameShort                    // <service>.internal, in the caller's namespace
	NameReverse                  // <d>.<c>.<b>.<a>.in-addr.arpa (PTR)
)

// Name is a parsed query name. Its strings are lowercase and share the
// query's memory when it was lowercase already.
type Name struct {
	Kind      NameKind
	Service   string
	Namespace string
	Machine   string
	ServiceID string
	// Key is "<service>.<namespace>" (NameService, NameNearest,
	// NameMachine), the Table's index.
	Key string
	// Addr is the address a NameReverse names.
	Addr netip.Addr
}

// ParseName classifies a query name (case-insensitive, with or without the
// trailing dot). It allocates only for names with upper-case letters.
func ParseName(q string) Name {
	q = lower(q)
	if !strings.HasSuffix(q, ".") {
		q += "."
	}
	if strings.HasSuffix(q, reverseZone) {
		if a, ok := parseReverse(q[:len(q)-len(reverseZone)]); ok {
			return Name{Kind: NameReverse, Addr: a}
		}
		return Name{Kind: NameExternal}
	}
	if q != Zone && !strings.HasSuffix(q, "."+Zone) {
		return Name{Kind: NameExternal}
	}
	if q == Zone {
		return Name{Kind: NameUnknown}
	}
	rest := q[:len(q)-len(Zone)-1]
	var l [5]string
	n := 0
	for {
		i := strings.IndexByte(rest, '.')
		s := rest
		if i >= 0 {
			s = rest[:i]
		}
		if s == "" || n == len(l) {
			return Name{Kind: NameUnknown}
		}
		l[n] = s
		n++
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	key := q[:min(len(q), len(l[0])+1+len(l[1]))] // l[0] starts q
	switch {
	case n == 1:
		return Name{Kind: NameShort, Service: l[0]}
	case n == 2:
		return Name{Kind: NameService, Service: l[0], Namespace: l[1], Key: key}
	case n == 3 && l[2] == "nearest":
		return Name{Kind: NameNearest, Service: l[0], Namespace: l[1], Key: key}
	case n == 3 && l[1] == "id" && l[2] == "lookup":
		return Name{Kind: NameID, ServiceID: l[0]}
	case n == 4 && l[3] == "machine":
		return Name{Kind: NameMachine, Service: l[0], Namespace: l[1], Machine: l[2], Key: key}
	}
	// Includes the reserved <service>.<ns>.<region>.region.internal form.
	return Name{Kind: NameUnknown}
}

// lower is strings.ToLower for ASCII names without allocating when q is
// lowercase already (the common case).
func lower(q string) string {
	for i := 0; i < len(q); i++ {
		if c := q[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(q)
		}
	}
	return q
}

// parseReverse reads "d.c.b.a" as the address a.b.c.d.
func parseReverse(s string) (netip.Addr, bool) {
	var b [4]byte
	for i := 3; i >= 0; i-- {
		j := strings.IndexByte(s, '.')
		part := s
		if i > 0 {
			if j < 0 {
				return netip.Addr{}, false
			}
			part, s = s[:j], s[j+1:]
		} else if j >= 0 {
			return netip.Addr{}, false
		}
		if part == "" || len(part) > 3 || (len(part) > 1 && part[0] == '0') {
			return netip.Addr{}, false
		}
		v := 0
		for k := 0; k < len(part); k++ {
			c := part[k]
			if c < '0' || c > '9' {
				return netip.Addr{}, false
			}
			v = v*10 + int(c-'0')
		}
		if v > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	return netip.AddrFrom4(b), true
}
