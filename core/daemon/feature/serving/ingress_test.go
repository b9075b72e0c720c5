package serving

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
)

func TestIngressSpecAndStatus(t *testing.T) {
	h := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating}) // no network kept: the default
	f := h.feature()
	b, err := f.IngressSpec()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ingress.ParseSpec(b)
	if err != nil {
		t.Fatalf("the daemon's spec does not parse: %v\n%s", err, b)
	}
	if s.Machine != "abc" || s.Listen != ":80" || s.StoreAPI != filepath.Join(h.run, "store", "api.sock") || s.StoreTokenFile != "" || s.ClusterSecretFile != store.ClusterSecretPath("/var/lib/ployz") ||
		s.StatusFile != filepath.Join(h.run, "ingress-status.json") || s.StateDir != "/var/lib/ployz/ingress" || s.NetworkPrefix() != netip.MustParsePrefix("10.210.0.0/16") {
		t.Fatalf("%+v", s)
	}
	// No status file: not running, but an answer.
	got, err := f.ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if st := got; err != nil || st.Running || st.MachineID != "abc" {
		t.Fatalf("%+v %v", got, err)
	}
	want := ingress.Status{MachineID: "abc", Running: true, Routes: []ingress.Route{{Hostname: "a.b", Owner: "x/y", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}}}
	raw, _ := json.Marshal(want)
	os.WriteFile(f.IngressStatusPath(), raw, 0o644)
	got, err = f.ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if st := got; err != nil || !st.Running || len(st.Routes) != 1 || st.Routes[0].Upstreams[0] != "10.0.0.1:80" {
		t.Fatalf("%+v %v", got, err)
	}
	if got.Stale {
		t.Fatal("fresh status reported stale")
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(f.IngressStatusPath(), old, old)
	if got, _ = f.ingressStatus(context.Background(), rpc.IngressStatusRequest{}); !got.Stale {
		t.Fatal("a status file a minute old is not stale")
	}
	os.WriteFile(f.IngressStatusPath(), []byte("{"), 0o644)
	if _, err := f.ingressStatus(context.Background(), rpc.IngressStatusRequest{}); err == nil || !strings.Contains(err.Error(), "ingress-status.json") {
		t.Fatalf("malformed status file: %v", err)
	}
}

// TestIngressStatusNeedsIngressCapability: with no healthy ingress plugin,
// ingress_status is refused naming the plugin capability it needs.
func TestIngressStatusNeedsIngressCapability(t *testing.T) {
	ph, err := pluginhost.New(pluginhost.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating})
	h.plugins, h.configs = ph, ph
	_, err = h.feature().ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if c, ok := rpc.Capability(err); !ok || c != ingress.CapHTTP {
		t.Fatalf("ingress_status without the ingress plugin: %v (capability %q)", err, c)
	}
}

// PLOYZ_ACME_DIRECTORY in the daemon's environment reaches the spec:
// unset is Let's Encrypt, empty is HTTPS off, a URL is that CA; a
// malformed one is refused by the spec check, naming the field.
func TestIngressSpecACME(t *testing.T) {
	f := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating}).feature()
	spec := func() (ingress.Spec, error) {
		b, err := f.IngressSpec()
		if err != nil {
			return ingress.Spec{}, err
		}
		return ingress.ParseSpec(b)
	}
	t.Setenv(ingress.EnvACMEDirectory, "")
	os.Unsetenv(ingress.EnvACMEDirectory)
	s, err := spec()
	if err != nil || s.ACME == nil || s.ACME.Directory != ingress.LetsEncryptDirectory || s.ListenTLS != ":443" {
		t.Fatalf("unset: %+v %v", s, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "")
	if s, err := spec(); err != nil || s.ACME != nil || s.ListenTLS != "" {
		t.Fatalf("empty: %+v %v", s, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "https://pebble.test:14000/dir")
	t.Setenv(ingress.EnvACMECAFile, "/etc/ployz/ca.pem")
	t.Setenv(ingress.EnvACMERankDelay, "2")
	s, err = spec()
	if err != nil || s.ACME.Directory != "https://pebble.test:14000/dir" || s.ACME.CAFile != "/etc/ployz/ca.pem" || s.ACME.RankDelaySeconds != 2 {
		t.Fatalf("set: %+v %v", s.ACME, err)
	}
	t.Setenv(ingress.EnvACMEDirectory, "http://plain.test/dir")
	if _, err := spec(); err == nil || !strings.Contains(err.Error(), `"acme.directory"`) {
		t.Fatalf("http directory: %v", err)
	}
}
