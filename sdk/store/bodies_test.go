package store

import (
	"testing"

	"github.com/ployz/ployz/internal/bodyfixture"
)

// TestBodyFixtures pins the JSON of the rows a plugin reads or owns
// (docs/formats.md, "Stable promise"; the entries moved verbatim from
// core/store's fixture; certificate was added, and membership, the
// answer of GET /v1/membership): each entry decodes,
// re-encodes byte-identically, and still decodes with a field a newer
// writer added (bodyfixture.Check).
func TestBodyFixtures(t *testing.T) {
	bodyfixture.Check(t, "testdata/bodies.json", map[string]any{
		"machine":     &MachineBody{},
		"container":   &ContainerBody{},
		"serving":     &ServingBody{},
		"serving_ack": &ServingAckBody{},
		"certificate": &CertificateBody{},
		"membership":  &Membership{},
		// DNS-01: a DNS provider's row and an issuance waiting on DNS-01.
		"certificate_dns_provider": &CertificateBody{},
		"certificate_dns01":        &CertificateBody{},
	})
}

func TestServingBodyHas(t *testing.T) {
	p := ServingBody{ID: "p1", Containers: []ServingContainer{{ID: "c1", Machine: "m1", ImageID: "sha256:b", Deployment: "d2"}, {ID: "c2", Machine: "m2"}}}
	cases := []struct {
		key, owner string
		b          ContainerBody
		want       bool
	}{
		{"c1", "m1", ContainerBody{ImageID: "sha256:b", Deployment: "d2"}, true},
		{"c1", "m1", ContainerBody{ImageID: "sha256:b", Deployment: "d1"}, false}, // older deployment
		{"c1", "m1", ContainerBody{ImageID: "sha256:a", Deployment: "d2"}, false}, // other image
		{"c1", "m3", ContainerBody{ImageID: "sha256:b", Deployment: "d2"}, false}, // other Machine
		{"c2", "m2", ContainerBody{ImageID: "anything"}, true},                    // identity not recorded
		{"c3", "m1", ContainerBody{}, false},
	}
	for _, c := range cases {
		if got := p.Has(c.key, c.owner, c.b); got != c.want {
			t.Errorf("Has(%s, %s, %+v) = %v, want %v", c.key, c.owner, c.b, got, c.want)
		}
	}
}
