package ingress

import (
	"fmt"
	"strings"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// The status file (Spec.StatusFile): what an ingress has loaded, as it last
// wrote it. ployzd serves it unchanged as the ingress_status Machine RPC (the
// ingress half of a Service's status, kept apart from execution status: a
// Container can be ready while its route is pending or in conflict). A
// frozen format (docs/formats.md, "The ingress status file"): fields are
// only added, readers ignore what they do not know.

// Route states.
const (
	RoutePublished = "published" // the owner has ready upstreams in the loaded config
	RoutePending   = "pending"   // the owner has no ready upstream: the route answers 502
	RouteConflict  = "conflict"  // more than one Service claims the hostname
)

// Certificate states in Status.Certificates.
const (
	// CertIssued: valid material is loaded for the hostname (a renewal
	// may be pending or failing; Error says so).
	CertIssued = "issued"
	// CertPending: no material yet; issuance waits its turn or runs.
	CertPending = "pending"
	// CertFailed: no valid material and the last attempt failed.
	CertFailed = "failed"
)

// StaleAfterSeconds is how old a status file may be before the daemon marks
// it Stale: an ingress rewrites it at least every 5 s while it runs.
const StaleAfterSeconds = 30

// Status is the status file's document and the ingress_status answer.
type Status struct {
	MachineID string `json:"machine_id"`
	// Running is false when no status file exists: the ingress has not
	// loaded anything from the store on this Machine.
	Running bool `json:"running"`
	// Off is set by the daemon of a Machine whose ployz.accepts leaves
	// ingress out: no ingress runs there and nothing listens on 80 or
	// 443, so it has no routes to report and acks no Serving Pointer.
	// Absent from older daemons, which run ingress everywhere.
	Off bool `json:"off,omitempty"`
	// Stale is set by the daemon when the file is older than
	// StaleAfterSeconds: the routes are what the ingress last reported,
	// not a live view.
	Stale  bool   `json:"stale,omitempty"`
	Listen string `json:"listen,omitempty"`
	// Loaded is when the ingress last loaded a config (unix seconds);
	// Checked is when it last read the store successfully.
	Loaded     int64  `json:"loaded,omitempty"`
	Checked    int64  `json:"checked,omitempty"`
	ConfigHash string `json:"config_hash,omitempty"`
	// StoreError is set while the store is unreachable and the last
	// config keeps serving.
	StoreError string `json:"store_error,omitempty"`
	// LoadError is the refusal of the newest config; the previously
	// loaded one keeps serving.
	LoadError string  `json:"load_error,omitempty"`
	Routes    []Route `json:"routes,omitempty"`
	// Pointers are the Serving Pointers (Service -> pointer id) the
	// loaded config follows: what this Machine acks.
	Pointers map[string]string `json:"pointers,omitempty"`
	// Skipped are Container rows whose routes were not used, each with
	// the reason naming the offending field.
	Skipped []SkippedRoute `json:"skipped,omitempty"`
	// ListenTLS is the HTTPS listen address when HTTPS is on;
	// Certificates is the state of each routed hostname's certificate
	// and SkippedCertificates the malformed certificates rows.
	ListenTLS           string               `json:"listen_tls,omitempty"`
	Certificates        []CertificateState   `json:"certificates,omitempty"`
	SkippedCertificates []SkippedCertificate `json:"skipped_certificates,omitempty"`
}

// Route is one route in the loaded config: a hostname (HTTP) or, with
// Protocol "tcp", a TCP Port.
type Route struct {
	Hostname string `json:"hostname,omitempty"`
	Protocol string `json:"protocol,omitempty"` // "" is http
	Port     int    `json:"port,omitempty"`     // tcp only
	// Path is an HTTP route's path prefix ("" is the whole hostname);
	// the fields after it are the owner's options for it
	// (store.IngressRoute). A status file carries BasicAuth's user names
	// with their hashes left out.
	Path string `json:"path,omitempty"`
	routeopt.Options
	// Owner is "namespace/service" (empty when a conflict has no
	// previous owner: nothing is published); Claimants lists every
	// Service that claims the route when State is conflict.
	Owner     string   `json:"owner"`
	State     string   `json:"state"`
	Upstreams []string `json:"upstreams,omitempty"` // ip:port, local ones first
	// Local is how many of Upstreams (the first ones) run on this
	// Machine: the ingress spreads requests over those, and tries the
	// rest in order when none answers or there is none.
	Local int `json:"local,omitempty"`
	// Down lists the Machines this Machine holds Down whose ready
	// Containers of the owner were left out; with no upstream left the
	// route answers 503 saying so.
	Down []string `json:"down,omitempty"`
	// Containers are the upstreams' Container ids, in Upstreams' order.
	Containers []string `json:"containers,omitempty"`
	// Pointer is the id of the owner's Serving Pointer the upstreams
	// follow; empty when the Service has none (every ready Container).
	Pointer   string   `json:"pointer,omitempty"`
	Claimants []string `json:"claimants,omitempty"`
	Detail    string   `json:"detail,omitempty"`
}

// Key names the route: its hostname followed by its path
// ("app.example.com/api"; the hostname alone without one), or "tcp/PORT".
func (s Route) Key() string {
	if s.Protocol == "tcp" {
		return fmt.Sprintf("tcp/%d", s.Port)
	}
	return s.Hostname + s.Path
}

// SkippedRoute is one route of one Container row that was not used.
type SkippedRoute struct {
	Container string `json:"container"` // row key
	Reason    string `json:"reason"`
}

// CertificateState is the HTTPS state of one hostname the ingress routes,
// as this Machine sees the replicated certificates table.
type CertificateState struct {
	Hostname string `json:"hostname"`
	State    string `json:"state"`
	// NotAfter is the loaded material's expiry (unix seconds).
	NotAfter int64 `json:"not_after,omitempty"`
	// Issuer is the Machine that wrote the material (or holds the
	// challenge of the issuance in progress).
	Issuer string `json:"issuer,omitempty"`
	// Error is the last failed attempt's error; NextAttemptAt (unix
	// seconds) is when the Cluster tries again.
	Error         string `json:"error,omitempty"`
	NextAttemptAt int64  `json:"next_attempt_at,omitempty"`
	Detail        string `json:"detail,omitempty"`
	// Source is "user" when a user certificate serves the hostname
	// (Issuer is then the certificate's issuer); absent: ACME.
	Source string `json:"source,omitempty"`
}

// SkippedCertificate is a certificates row that was not loaded, with the
// reason naming the offending field.
type SkippedCertificate struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ValidHostname checks an ingress hostname: lowercase DNS labels of
// letters, digits and '-', at least two labels, no wildcard, no port, no
// trailing dot, at most 253 characters.
func ValidHostname(h string) error {
	if h == "" {
		return fmt.Errorf("is empty")
	}
	if len(h) > 253 {
		return fmt.Errorf("%q is longer than 253 characters", h)
	}
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return fmt.Errorf("%q needs at least two labels (e.g. app.example.com)", h)
	}
	for _, l := range labels {
		if err := validLabel(h, l); err != nil {
			return err
		}
	}
	return nil
}

func validLabel(h, l string) error {
	if l == "" || len(l) > 63 {
		return fmt.Errorf("%q has an empty or over-long label", h)
	}
	if l[0] == '-' || l[len(l)-1] == '-' {
		return fmt.Errorf("%q has a label starting or ending with '-'", h)
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("%q contains %q (want lowercase letters, digits, '-' and '.')", h, r)
		}
	}
	return nil
}
