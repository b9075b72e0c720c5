package dns

import "strings"

// Zone is the suffix Internal DNS is authoritative for.
const Zone = "internal."

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
)

// Name is a parsed query name.
type Name struct {
	Kind      NameKind
	Service   string
	Namespace string
	Machine   string
	ServiceID string
}

// ParseName classifies a query name (case-insensitive, with or without the
// trailing dot).
func ParseName(q string) Name {
	q = strings.ToLower(q)
	if !strings.HasSuffix(q, ".") {
		q += "."
	}
	if q != Zone && !strings.HasSuffix(q, "."+Zone) {
		return Name{Kind: NameExternal}
	}
	rest := strings.TrimSuffix(strings.TrimSuffix(q, Zone), ".")
	if rest == "" {
		return Name{Kind: NameUnknown}
	}
	l := strings.Split(rest, ".")
	for _, s := range l {
		if s == "" {
			return Name{Kind: NameUnknown}
		}
	}
	switch {
	case len(l) == 2:
		return Name{Kind: NameService, Service: l[0], Namespace: l[1]}
	case len(l) == 3 && l[2] == "nearest":
		return Name{Kind: NameNearest, Service: l[0], Namespace: l[1]}
	case len(l) == 3 && l[1] == "id" && l[2] == "lookup":
		return Name{Kind: NameID, ServiceID: l[0]}
	case len(l) == 4 && l[3] == "machine":
		return Name{Kind: NameMachine, Service: l[0], Namespace: l[1], Machine: l[2]}
	}
	// Includes the reserved <service>.<ns>.<region>.region.internal form.
	return Name{Kind: NameUnknown}
}
