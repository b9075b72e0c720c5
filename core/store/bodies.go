package store

// The bodies below are frozen formats (DESIGN.md, Stable promise): fields
// are only ever added, each optional with a default; nothing is renamed or
// repurposed. Readers ignore unknown fields (encoding/json's default), so
// never decode these with DisallowUnknownFields.

// ClusterBody is a Cluster-wide fact.
type ClusterBody struct {
	Name          string `json:"name,omitempty"`
	Network       string `json:"network,omitempty"` // e.g. 10.210.0.0/16
	ProtocolMajor int    `json:"protocol_major,omitempty"`
}

// Defaults fills what an older writer left out.
func (b *ClusterBody) Defaults() {
	if b.ProtocolMajor == 0 {
		b.ProtocolMajor = 1
	}
}

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
}

// IngressRoute is one hostname route of a Container.
type IngressRoute struct {
	Hostname      string `json:"hostname"`
	ContainerPort int    `json:"container_port"`
}

// VolumeBody is one Volume copy on its Machine.
type VolumeBody struct {
	Name   string `json:"name,omitempty"`
	Driver string `json:"driver,omitempty"`
	Copy   string `json:"copy,omitempty"`
}

// CertificateBody is a certificate for one name.
type CertificateBody struct {
	Domains  []string `json:"domains,omitempty"`
	CertPEM  string   `json:"cert_pem,omitempty"`
	NotAfter int64    `json:"not_after,omitempty"` // unix seconds
}
