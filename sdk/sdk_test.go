package sdk

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		host, plugin []uint32
		want         uint32
		ok           bool
	}{
		{[]uint32{1, 2}, []uint32{1, 2, 3}, 2, true},
		{[]uint32{3, 1}, []uint32{1, 3}, 3, true},
		{[]uint32{1}, []uint32{1}, 1, true},
		{[]uint32{1, 2}, []uint32{5, 6}, 0, false},
		{[]uint32{1}, nil, 0, false},
	} {
		got, ok := Negotiate(tc.host, tc.plugin)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Negotiate(%v, %v) = %d, %v; want %d, %v", tc.host, tc.plugin, got, ok, tc.want, tc.ok)
		}
	}
}

func TestValidCapability(t *testing.T) {
	for _, good := range []string{"ployz.dns.serve.v1", "example.dns.spec-store.v12", "a.b.v1"} {
		if err := ValidCapability(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	for _, bad := range []string{"", "dns", "ployz.dns.serve", "Ployz.dns.v1", "ployz.dns.v0", "ployz..v1", "ployz.dns.serve/v1"} {
		if ValidCapability(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPluginValidate(t *testing.T) {
	ok := Plugin{Name: "dns", Kind: KindDNS, Version: "1"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for field, mutate := range map[string]func(*Plugin){
		"Register":        func(p *Plugin) { p.Capabilities = []string{"ployz.dns.serve.v1"} },
		"Name":            func(p *Plugin) { p.Name = "DNS plugin" },
		"Kind":            func(p *Plugin) { p.Kind = "" },
		"Version":         func(p *Plugin) { p.Version = "" },
		"Capabilities[1]": func(p *Plugin) { p.Capabilities = []string{"ployz.dns.serve.v1", "Serve DNS"} },
	} {
		p := ok
		mutate(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), `field "`+field+`"`) {
			t.Errorf("%s: refusal %v does not name the field", field, err)
		}
	}
}

func TestConfigureRefusesUnadvertisedVersion(t *testing.T) {
	var got uint32
	b := &baseServer{p: &Plugin{Name: "x", Kind: "k", Version: "1", APIVersions: []uint32{1, 2},
		Configure: func(_ context.Context, v uint32, _ []byte) error { got = v; return nil }}}
	if _, err := b.Configure(context.Background(), &pluginv1.ConfigureRequest{ApiVersion: 3}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Configure(v3) = %v, want InvalidArgument", err)
	}
	if _, err := b.Configure(context.Background(), &pluginv1.ConfigureRequest{ApiVersion: 2}); err != nil || got != 2 {
		t.Fatalf("Configure(v2) = %v, callback saw v%d", err, got)
	}
}

func TestReattachRoundTrip(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "dns.sock")
	if got := ReattachPath(socket); got != filepath.Join(filepath.Dir(socket), "dns.reattach.json") {
		t.Fatalf("ReattachPath = %s", got)
	}
	want := Reattach{Name: "dns", Protocol: "grpc", ProtocolVersion: 1, Network: "unix", Addr: socket, Pid: 42}
	if err := WriteReattach(ReattachPath(socket), want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReattach(ReattachPath(socket))
	if err != nil || got != want {
		t.Fatalf("ReadReattach = %+v, %v", got, err)
	}
	cfg := got.Config()
	if cfg.Test || cfg.ReattachFunc == nil || cfg.Pid != 42 || cfg.Addr.String() != socket || cfg.Addr.Network() != "unix" {
		t.Fatalf("Config = %+v", cfg)
	}
	if err := WriteReattach(ReattachPath(socket), Reattach{Name: "dns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReattach(ReattachPath(socket)); err == nil {
		t.Fatal("incomplete record accepted")
	}
}
