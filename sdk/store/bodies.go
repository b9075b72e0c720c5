package store

import "github.com/ployz/ployz/sdk/ingress/routeopt"

// The bodies below are the rows a plugin reads or owns; frozen formats (docs/formats.md, "Stable promise"): fields
// are only ever added, each optional with a default; nothing is renamed or
// repurposed. Readers ignore unknown fields (encoding/json's default), so
// never decode these with DisallowUnknownFields.

// MachineBody is a Machine's own record, written only by that Machine.
type MachineBody struct {
	Name         string            `json:"name,omitempty"`
	PublicKey    string            `json:"public_key,omitempty"`
	Endpoints    []string          `json:"endpoints,omitempty"`
	Subnet       string            `json:"subnet,omitempty"`
	ManagementIP string            `json:"management_ip,omitempty"`
	Phase        string            `json:"phase,omitempty"`
	Capabilities []string          `json:"capabilities,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Version      string            `json:"version,omitempty"`
	// StoreSite is the Machine's store site id, its name in store
	// membership, so an observer can tell which Machine a member is.
	StoreSite string `json:"store_site,omitempty"`
	// Session changes whenever the Machine boots: Container rows carry
	// the session their readiness was observed in.
	Session string `json:"session,omitempty"`
	// RPCKey is the Machine's Machine RPC identity (base64 Ed25519 public
	// key): the mesh listener admits callers holding it, and callers
	// accept only it from this Machine.
	RPCKey string `json:"rpc_key,omitempty"`
	// SignedAt (unix ms), SignedBy, Endorsement and Sig make the row
	// verifiable (core/machine/trust): Sig is an Ed25519 signature over
	// the row's id and its body without "sig", by the rpc_key of the
	// Machine named in SignedBy (empty: the row's own Machine). Readers
	// that do not verify ignore them.
	SignedAt int64  `json:"signed_at,omitempty"`
	SignedBy string `json:"signed_by,omitempty"`
	// Endorsement is the entry Machine's signature binding this Machine's
	// id to its rpc_key and WireGuard key, made when it enrolled; the
	// Machine repeats it in every row it writes.
	Endorsement *Endorsement `json:"endorsement,omitempty"`
	Sig         string       `json:"sig,omitempty"`
}

// Endorsement is one Machine vouching for another's keys at enrollment.
type Endorsement struct {
	// By is the endorsing (entry) Machine's id.
	By string `json:"by"`
	// Sig is By's Ed25519 signature (standard base64) over the endorsed
	// Machine's id, rpc_key and public_key.
	Sig string `json:"sig"`
}

// ContainerBody is one Container as its Machine reports it (the row's
// owner). Environment values never leave the Machine.
type ContainerBody struct {
	Service    string `json:"service,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	Image      string `json:"image,omitempty"`
	State      string `json:"state,omitempty"`
	IP         string `json:"ip,omitempty"`
	Name       string `json:"name,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	ServiceID  string `json:"service_id,omitempty"`
	SpecHash   string `json:"spec_hash,omitempty"`
	ImageID    string `json:"image_id,omitempty"`
	Health     string `json:"health,omitempty"`
	// Ready is the owner's verdict: running and past its readiness gate
	// (healthcheck, notification, or none). Only ready Containers serve.
	Ready     bool  `json:"ready,omitempty"`
	CreatedAt int64 `json:"created_at,omitempty"` // unix seconds
	// EnvNames lists the environment variable names; values stay local.
	EnvNames []string `json:"env_names,omitempty"`
	// Ingress are the hostname routes of the Container's spec; Ingress
	// Proxies route each hostname to the ready Containers claiming it.
	Ingress []IngressRoute `json:"ingress,omitempty"`
	// Session is the owner Machine's session (MachineBody.Session) in
	// which Ready was observed; a verdict from an earlier session is
	// stale and routes nothing.
	Session string `json:"session,omitempty"`
	// RestartCount, ExitCode, OOMKilled and FinishedAt describe the
	// Container's restarts and last exit, so any Machine can tell an
	// operator that a replica crashes.
	RestartCount int    `json:"restart_count,omitempty"`
	ExitCode     int    `json:"exit_code,omitempty"`
	OOMKilled    bool   `json:"oom_killed,omitempty"`
	FinishedAt   string `json:"finished_at,omitempty"` // RFC 3339
	// Networks are the isolation networks of the Container's spec
	// (rpc.ContainerSpec.Networks); absent: its namespace's only.
	Networks []string `json:"networks,omitempty"`
	// Aliases are the Container's compose network aliases
	// (rpc.ContainerSpec.Aliases), by isolation network: Internal DNS
	// answers each only to Containers on that network (NetworkAliases).
	Aliases map[string][]string `json:"aliases,omitempty"`
}

// IngressRoute is one ingress route of a Container: a hostname (HTTP) or,
// with Protocol "tcp", a TCP Port every ingress Machine listens on. An
// HTTP route may carry a Path prefix, StripPrefix, RedirectHTTPS (false:
// no redirect to HTTPS; absent: the default), a request body limit, a
// response timeout, header rules, basic authentication (bcrypt hashes),
// compression and RedirectTo (a 308 to the canonical hostname; written
// only by Machines advertising ployz.container.redirects.v1) (package sdk/ingress/routeopt; matching is
// sdk/ingress's paths.go). A reader that predates them sees a route for
// the whole hostname without them; ployz places such routes only on
// Machines that write them (they advertise ployz.container.routes.v1).
type IngressRoute struct {
	Hostname      string `json:"hostname,omitempty"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol,omitempty"`
	Port          int    `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	routeopt.Options
}

// ServingBody is a Service's Serving Pointer (table serving, keyed by
// "namespace/service"): the Containers its traffic goes to. A Deploy
// moves it once new Containers are ready; Ingress Proxies route only to
// the Containers it names and ack it (ServingAckBody); each Machine's
// retire loop stops its own Containers it superseded.
type ServingBody struct {
	// ID is minted on every move; acks name it.
	ID         string             `json:"id"`
	Deployment string             `json:"deployment,omitempty"`
	Containers []ServingContainer `json:"containers,omitempty"`
	MovedAt    int64              `json:"moved_at,omitempty"` // unix milliseconds
}

// ServingContainer is one Container a Serving Pointer names, with the
// identity an upstream must match: its Machine, image and deployment.
type ServingContainer struct {
	ID         string `json:"id"`
	Machine    string `json:"machine,omitempty"`
	ImageID    string `json:"image_id,omitempty"`
	Deployment string `json:"deployment,omitempty"`
}

// Has reports whether the pointer names the Container of row key with
// body b: same id, and the same Machine, image and deployment where the
// pointer recorded them.
func (p ServingBody) Has(key, owner string, b ContainerBody) bool {
	for _, c := range p.Containers {
		if c.ID != key {
			continue
		}
		return (c.Machine == "" || c.Machine == owner) &&
			(c.ImageID == "" || c.ImageID == b.ImageID) &&
			(c.Deployment == "" || c.Deployment == b.Deployment)
	}
	return false
}

// ServingAckBody is what one Machine's Ingress Proxy has loaded (table
// serving_acks, keyed by Machine id): per Service, the id of the Serving
// Pointer its running config follows.
type ServingAckBody struct {
	Pointers map[string]string `json:"pointers,omitempty"`
	Loaded   int64             `json:"loaded,omitempty"` // unix milliseconds
}

// CertificateBody is a certificate for one name (the row key, a
// hostname), shared by every Machine's Ingress Proxy: the material, the
// HTTP-01 challenge of an issuance in progress (every Machine answers it,
// whichever one the CA reaches) and the last attempt's outcome.
type CertificateBody struct {
	Domains  []string `json:"domains,omitempty"`
	CertPEM  string   `json:"cert_pem,omitempty"`  // leaf first, then the chain
	NotAfter int64    `json:"not_after,omitempty"` // unix seconds
	// KeyPEM is the certificate's private key.
	KeyPEM    string `json:"key_pem,omitempty"`
	NotBefore int64  `json:"not_before,omitempty"` // unix seconds
	// Issuer is the Machine that wrote the material or holds the
	// challenge of the issuance in progress.
	Issuer string `json:"issuer,omitempty"`
	// Challenge is set while Issuer's issuance waits on its challenge.
	Challenge *CertificateChallenge `json:"challenge,omitempty"`
	// LastError, Failures and NextAttemptAt (unix seconds) record failed
	// attempts since the last success; the old material stays.
	LastError     string `json:"last_error,omitempty"`
	Failures      int    `json:"failures,omitempty"`
	NextAttemptAt int64  `json:"next_attempt_at,omitempty"`
	// Source is "user" for a certificate an operator brought (row name
	// "user:" + id, key_pem sealed, never renewed); absent: ACME's.
	Source string `json:"source,omitempty"`
	// CA is a user certificate's issuer (the leaf's distinguished name).
	CA string `json:"ca,omitempty"`
	// AddedAt is when a user certificate or a DNS provider was added
	// (unix seconds).
	AddedAt int64 `json:"added_at,omitempty"`
	// DNSProvider is set on a DNS provider's row (Source "dns-provider",
	// row name "dns-provider:" + its name): the credentials the Ingress
	// Proxy answers DNS-01 challenges with. Such a row holds no
	// certificate.
	DNSProvider *DNSProviderBody `json:"dns_provider,omitempty"`
}

// DNSProviderBody is a DNS provider's configuration: which libdns
// provider, the zone it can change, its plain settings and its secret
// settings sealed (a JSON object of name to value, sealed with the
// Cluster key: sdk/ingress.DNSProviderSecretsPurpose).
type DNSProviderBody struct {
	Provider string            `json:"provider"`
	Zone     string            `json:"zone"`
	Settings map[string]string `json:"settings,omitempty"`
	Secrets  string            `json:"secrets,omitempty"`
}

// CertificateChallenge is a pending challenge: HTTP-01 (Type empty)
// answers KeyAuthorization on /.well-known/acme-challenge/<Token>;
// "dns-01" is answered in DNS by the issuer, and the row only tells the
// other Machines an issuance is in progress.
type CertificateChallenge struct {
	Token            string `json:"token"`
	KeyAuthorization string `json:"key_authorization"`
	// Type is "dns-01", or empty for HTTP-01 (the only kind before).
	Type string `json:"type,omitempty"`
}
