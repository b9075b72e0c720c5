package server

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLoadFileConfigCorrosionKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	body := `
[db]
path = "/var/lib/ployz/store/store.db"
schema_paths = ["/etc/ployz/schema"]

[gossip]
addr = "10.210.1.1:7570"
bootstrap = ["10.210.2.1:7570", "10.210.3.1:7570"]
plaintext = true
max_mtu = 1372

[api]
addr = "127.0.0.1:7571"
authz.bearer-token = "s3cret"

[admin]
path = "/run/ployz/store-admin.sock"

[telemetry]
prometheus.addr = "127.0.0.1:9090"
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFileConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	fc.Apply(&c)
	want := Config{DBPath: "/var/lib/ployz/store/store.db", SchemaPaths: []string{"/etc/ployz/schema"},
		GossipAddr: "10.210.1.1:7570", Bootstrap: []string{"10.210.2.1:7570", "10.210.3.1:7570"},
		APIAddr: "127.0.0.1:7571", Token: "s3cret", AdminPath: "/run/ployz/store-admin.sock"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
	if _, err := LoadFileConfig(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Fatal("missing config file accepted")
	}
}
