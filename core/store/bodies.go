package store

// The bodies below are frozen formats (docs/formats.md, "Stable promise"): fields
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

// VolumeBody is one Volume copy on its Machine.
type VolumeBody struct {
	Name   string `json:"name,omitempty"`
	Driver string `json:"driver,omitempty"`
	Copy   string `json:"copy,omitempty"`
}
