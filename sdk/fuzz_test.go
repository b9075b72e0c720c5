package sdk

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadReattach feeds arbitrary bytes as a reattach record, which a
// host reads from the socket directory: ReadReattach must refuse or return
// a complete unix-socket gRPC record whose Config a host can use, and a
// record it accepts survives WriteReattach unchanged.
func FuzzReadReattach(f *testing.F) {
	for _, s := range []string{
		`{"name":"dns","protocol":"grpc","protocol_version":1,"network":"unix","addr":"/run/ployz/plugins/dns.sock","pid":4242}`,
		`{"name":"dns","protocol":"netrpc","protocol_version":1,"network":"unix","addr":"/x","pid":1}`,
		`{"protocol":"grpc","network":"tcp","addr":"127.0.0.1:1","pid":1}`,
		`{"protocol":"grpc","network":"unix","addr":"/x","pid":-1}`,
		`{"protocol":"grpc","network":"unix","addr":"","pid":7}`,
		`null`, `[]`, ``, `{"pid":1e99}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "p.reattach.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadReattach(path)
		if err != nil {
			return
		}
		if r.Protocol != "grpc" || r.Network != "unix" || r.Addr == "" || r.Pid <= 0 {
			t.Fatalf("accepted an incomplete record: %+v", r)
		}
		c := r.Config()
		if c.ReattachFunc == nil || c.Test || c.Addr.Network() != "unix" || c.Addr.String() != r.Addr || c.Pid != r.Pid {
			t.Fatalf("Config(%+v) = %+v", r, c)
		}
		if err := WriteReattach(path, r); err != nil {
			t.Fatal(err)
		}
		if again, err := ReadReattach(path); err != nil || again != r {
			t.Fatalf("round trip: %+v -> %+v, %v", r, again, err)
		}
	})
}
