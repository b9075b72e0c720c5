package operator

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ployz/ployz/core/rpc"
)

func hostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pk, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestExportCarriesPinsNotKeys(t *testing.T) {
	hk := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	k1, k2 := hostKey(t), hostKey(t)
	if err := hk.Pin("192.0.2.10", k1); err != nil {
		t.Fatal(err)
	}
	if err := hk.Pin("192.0.2.11:2222", k2); err != nil {
		t.Fatal(err)
	}
	c := Context{Name: "prod", Network: "10.210.0.0/16", Connections: []Connection{
		{URL: "ssh://root@192.0.2.10", SSHKey: "/home/alice/.ssh/id_prod"},
		{URL: "ssh://deploy@192.0.2.11:2222"},
		{URL: "unix:///run/ployz/ployz.sock"},
	}}
	e, err := ExportContext(c, hk)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(e)
	if strings.Contains(string(b), "id_prod") || strings.Contains(string(b), "PRIVATE") {
		t.Fatalf("export carries a key path or key: %s", b)
	}
	got, err := ParseExport(b)
	if err != nil {
		t.Fatalf("parse own export: %v\n%s", err, b)
	}
	want := Context{Name: "prod", Network: "10.210.0.0/16", Connections: []Connection{
		{URL: "ssh://root@192.0.2.10"}, {URL: "ssh://deploy@192.0.2.11:2222"}, {URL: "unix:///run/ployz/ployz.sock"}}}
	if gb, wb := mustJSON(t, got.Context()), mustJSON(t, want); gb != wb {
		t.Fatalf("round trip = %s, want %s", gb, wb)
	}

	// The receiver's empty pin file gets exactly the exported keys.
	recv := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	if err := got.Trust(recv); err != nil {
		t.Fatal(err)
	}
	for addr, k := range map[string]ssh.PublicKey{"192.0.2.10:22": k1, "192.0.2.11:2222": k2} {
		pins, err := recv.Pinned(addr)
		if err != nil || len(pins) != 1 || string(pins[0].Marshal()) != string(k.Marshal()) {
			t.Fatalf("receiver pins for %s = %v, %v", addr, pins, err)
		}
	}
	if err := got.Trust(recv); err != nil {
		t.Fatalf("trusting the same export again: %v", err)
	}

	// Unpinned hosts cannot be exported: the receiver would trust first use.
	c.Connections = append(c.Connections, Connection{URL: "ssh://root@192.0.2.99"})
	if _, err := ExportContext(c, hk); err == nil || !strings.Contains(err.Error(), "192.0.2.99") {
		t.Fatalf("export with an unpinned host = %v; want refused naming it", err)
	}
}

// An export never silently replaces a pin the receiver already has.
func TestExportTrustRefusesOtherPins(t *testing.T) {
	sender := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	recv := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	theirs, ours := hostKey(t), hostKey(t)
	if err := sender.Pin("192.0.2.10", theirs); err != nil {
		t.Fatal(err)
	}
	if err := recv.Pin("192.0.2.10", ours); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(recv.Path)
	e, err := ExportContext(Context{Name: "prod", Connections: []Connection{{URL: "ssh://root@192.0.2.10"}}}, sender)
	if err != nil {
		t.Fatal(err)
	}
	err = e.Trust(recv)
	var ch *rpc.HostKeyChangedError
	if !errors.As(err, &ch) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(ours)) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(theirs)) {
		t.Fatalf("trust over another pin = %v; want refused naming both keys", err)
	}
	if after, _ := os.ReadFile(recv.Path); string(after) != string(before) {
		t.Fatalf("a refused export changed the pins:\n%s", after)
	}
}

func TestParseExportNamesTheField(t *testing.T) {
	k := hostKey(t)
	line := func(host string) string {
		return host + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
	}
	good := func() map[string]any {
		return map[string]any{"ployz_context": 1, "name": "prod",
			"connections": []any{map[string]any{"url": "ssh://root@192.0.2.10"}},
			"host_keys":   []any{line("192.0.2.10")}}
	}
	cases := []struct {
		name string
		edit func(m map[string]any)
		raw  string
		want string
	}{
		{name: "not json", raw: "ployz ctx export prod", want: "not a JSON document"},
		{name: "version", edit: func(m map[string]any) { m["ployz_context"] = 2 }, want: "ployz_context: 2"},
		{name: "no version", edit: func(m map[string]any) { delete(m, "ployz_context") }, want: "ployz_context: 0"},
		{name: "name", edit: func(m map[string]any) { m["name"] = "my prod" }, want: "name: context name"},
		{name: "no connections", edit: func(m map[string]any) { m["connections"] = []any{} }, want: "connections: empty"},
		{name: "scheme", edit: func(m map[string]any) { m["connections"] = []any{map[string]any{"url": "http://x"}} }, want: "connections[0]"},
		{name: "key path", edit: func(m map[string]any) {
			m["connections"] = []any{map[string]any{"url": "ssh://root@192.0.2.10", "ssh_key": "/root/.ssh/id"}}
		}, want: "connections[0].ssh_key"},
		{name: "garbage key", edit: func(m map[string]any) { m["host_keys"] = []any{"192.0.2.10 ssh-ed25519 !!!"} }, want: "host_keys[0]"},
		{name: "foreign host", edit: func(m map[string]any) { m["host_keys"] = []any{line("192.0.2.10"), line("198.51.100.1")} }, want: "host_keys[1]: host 198.51.100.1"},
		{name: "missing key", edit: func(m map[string]any) { delete(m, "host_keys") }, want: "host_keys: no key for 192.0.2.10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(c.raw)
			if c.edit != nil {
				m := good()
				c.edit(m)
				raw, _ = json.Marshal(m)
			}
			_, err := ParseExport(raw)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseExport(%s) = %v; want an error naming %q", raw, err, c.want)
			}
		})
	}
	// A newer CLI's extra field is read, not refused.
	m := good()
	m["operator"] = "alice@laptop"
	raw, _ := json.Marshal(m)
	if _, err := ParseExport(raw); err != nil {
		t.Fatalf("an unknown field was refused: %v", err)
	}
}

func TestContextFromEnv(t *testing.T) {
	hk := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	t.Setenv(EnvContext, "")
	if _, ok, err := ContextFromEnv(hk); ok || err != nil {
		t.Fatalf("unset: ok=%t err=%v", ok, err)
	}
	t.Setenv(EnvContext, `{"ployz_context":1,"name":"ci","connections":[{"url":"unix:///run/ployz/ployz.sock"}]}`)
	c, ok, err := ContextFromEnv(hk)
	if !ok || err != nil || c.Name != "ci" || len(c.Connections) != 1 {
		t.Fatalf("set: %+v ok=%t err=%v", c, ok, err)
	}
	t.Setenv(EnvContext, `{"name":"ci"}`)
	if _, ok, err := ContextFromEnv(hk); !ok || err == nil || !strings.Contains(err.Error(), EnvContext+": exported context: ployz_context") {
		t.Fatalf("malformed: ok=%t err=%v", ok, err)
	}
}

func TestSSHKeyFromEnv(t *testing.T) {
	_, sk, _ := ed25519.GenerateKey(rand.Reader)
	blk, err := ssh.MarshalPrivateKey(sk, "")
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(blk))

	t.Setenv(EnvSSHKey, "/ci/key")
	if o := (DialOptions{}).SSH(""); o.KeyFile != "/ci/key" || o.Key != nil {
		t.Fatalf("path: %+v", o)
	}
	if o := (DialOptions{}).SSH("/flag/key"); o.KeyFile != "/flag/key" {
		t.Fatalf("--ssh-key must win over %s: %+v", EnvSSHKey, o)
	}
	t.Setenv(EnvSSHKey, pemKey)
	if o := (DialOptions{}).SSH(""); string(o.Key) != pemKey || o.KeyFile != "" {
		t.Fatalf("material: KeyFile=%q Key=%d bytes", o.KeyFile, len(o.Key))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
