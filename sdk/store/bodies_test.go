package store

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestBodyFixtures pins the JSON of the rows a plugin reads or owns
// (docs/formats.md, "Stable promise"; the entries moved verbatim from
// core/store's fixture, and certificate was added): each fixture decodes,
// re-encodes byte-identically, and still decodes with a field a newer
// writer added.
func TestBodyFixtures(t *testing.T) {
	raw, err := os.ReadFile("testdata/bodies.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	check := func(name string, v any) {
		t.Helper()
		b, ok := fx[name]
		if !ok {
			t.Fatalf("fixture %q missing", name)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := json.Marshal(v)
		var want bytes.Buffer
		if err := json.Compact(&want, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, want.Bytes()) {
			t.Errorf("%s re-encodes as\n%s\nwant\n%s", name, again, want.Bytes())
		}
		newer := append(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("}")), []byte(`,"added_later":{"x":1}}`)...)
		if err := json.Unmarshal(newer, v); err != nil {
			t.Errorf("%s with an unknown field: %v", name, err)
		}
	}
	check("machine", &MachineBody{})
	check("container", &ContainerBody{})
	check("serving", &ServingBody{})
	check("serving_ack", &ServingAckBody{})
	check("certificate", &CertificateBody{})
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
