package machine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad reads arbitrary bytes as the local Machine record, as a
// damaged disk or a hand edit could leave it. Properties: no panic; an
// accepted record has an id and a known phase and survives Save then Load
// unchanged; a refusal of a document that is JSON names the field it
// refuses (a JSON syntax error has no field to name).
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"id":"0123456789abcdef0123456789abcdef","name":"m2","phase":"joining","subnet":"10.210.2.0/24","network":"10.210.0.0/16","endpoints":["10.0.0.2:51820"],"join_peers":[{"id":"p1","public_key":"k","subnet":"10.210.0.0/24","endpoints":["10.0.0.1:51820"]}],"target_versions":{"s1":7}}`))
	f.Add([]byte(`{"id":"x","phase":"flying"}`))
	f.Add([]byte(`{"id":"x","join_peers":[{"id":"p","subnet":"10.210.0.0/33"}]}`))
	f.Add([]byte(`{"id":"x","endpoints":["[::1]:99999"]}`))
	f.Add([]byte(`{"id":`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "machine.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Load(p)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, p) {
				t.Fatalf("refusal %q does not name the file", msg)
			}
			if json.Valid(data) && bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && !strings.Contains(msg, "field ") {
				t.Fatalf("refusal of a JSON object names no field: %v", err)
			}
			return
		}
		if r.ID == "" || !r.Phase.Valid() {
			t.Fatalf("accepted a record without id or phase: %+v", r)
		}
		if err := Save(p, r); err != nil {
			t.Fatalf("save accepted record %+v: %v", r, err)
		}
		again, err := Load(p)
		if err != nil {
			t.Fatalf("reload of a saved record: %v", err)
		}
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("save/load changed the record:\n %s\n %s", a, b)
		}
	})
}
