package daemon

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func TestIngressSpecAndStatus(t *testing.T) {
	run := t.TempDir()
	d := &Daemon{cfg: Config{DataDir: "/var/lib/ployz", RunDir: run}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: "abc", Phase: machine.Participating}} // no network kept: the default
	b, err := d.ingressSpec()
	if err != nil {
		t.Fatal(err)
	}
	s, err := ingress.ParseSpec(b)
	if err != nil {
		t.Fatalf("the daemon's spec does not parse: %v\n%s", err, b)
	}
	if s.Machine != "abc" || s.Listen != ":80" || s.StoreAPI != filepath.Join(run, "store", "api.sock") || s.StoreTokenFile != "" || s.ClusterSecretFile != store.ClusterSecretPath("/var/lib/ployz") ||
		s.StatusFile != filepath.Join(run, "ingress-status.json") || s.StateDir != "/var/lib/ployz/ingress" || s.NetworkPrefix() != netip.MustParsePrefix("10.210.0.0/16") {
		t.Fatalf("%+v", s)
	}
	// No status file: not running, but an answer.
	got, err := d.ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if st := got; err != nil || st.Running || st.MachineID != "abc" {
		t.Fatalf("%+v %v", got, err)
	}
	want := ingress.Status{MachineID: "abc", Running: true, Routes: []ingress.Route{{Hostname: "a.b", Owner: "x/y", State: ingress.RoutePublished, Upstreams: []string{"10.0.0.1:80"}}}}
	raw, _ := json.Marshal(want)
	os.WriteFile(d.ingressStatusPath(), raw, 0o644)
	got, err = d.ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if st := got; err != nil || !st.Running || len(st.Routes) != 1 || st.Routes[0].Upstreams[0] != "10.0.0.1:80" {
		t.Fatalf("%+v %v", got, err)
	}
	if got.Stale {
		t.Fatal("fresh status reported stale")
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(d.ingressStatusPath(), old, old)
	if got, _ = d.ingressStatus(context.Background(), rpc.IngressStatusRequest{}); !got.Stale {
		t.Fatal("a status file a minute old is not stale")
	}
	os.WriteFile(d.ingressStatusPath(), []byte("{"), 0o644)
	if _, err := d.ingressStatus(context.Background(), rpc.IngressStatusRequest{}); err == nil || !strings.Contains(err.Error(), "ingress-status.json") {
		t.Fatalf("malformed status file: %v", err)
	}
}

func TestContainerRowCarriesIngressRoutes(t *testing.T) {
	ob := rpc.ContainerObservation{Namespace: "demo", Service: "web", Ready: true,
		Spec: &rpc.ContainerSpec{Ingress: []rpc.IngressRoute{{Hostname: "hello.example.test", ContainerPort: 8080},
			{Protocol: "tcp", Port: 8081, ContainerPort: 8080}}}}
	b := serviceContainerBody(ob, container.InspectResponse{})
	if len(b.Ingress) != 2 || b.Ingress[0].Hostname != "hello.example.test" || b.Ingress[0].ContainerPort != 8080 ||
		b.Ingress[1] != (sdkstore.IngressRoute{Protocol: "tcp", Port: 8081, ContainerPort: 8080}) {
		t.Fatalf("row %+v", b)
	}
	raw, _ := json.Marshal(b)
	if !strings.Contains(string(raw), `"ingress":[{"hostname":"hello.example.test","container_port":8080},{"container_port":8080,"protocol":"tcp","port":8081}]`) {
		t.Fatalf("row JSON %s", raw)
	}
}

// TestIngressStatusNeedsIngressCapability: with no healthy ingress plugin,
// ingress_status is refused naming the plugin capability it needs.
func TestIngressStatusNeedsIngressCapability(t *testing.T) {
	h, err := pluginhost.New(pluginhost.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: Config{RunDir: t.TempDir()}, log: hclog.NewNullLogger(), plugins: h,
		rec: machine.Record{ID: "abc", Phase: machine.Participating}}
	_, err = d.ingressStatus(context.Background(), rpc.IngressStatusRequest{})
	if c, ok := rpc.Capability(err); !ok || c != ingress.CapHTTP {
		t.Fatalf("ingress_status without the ingress plugin: %v (capability %q)", err, c)
	}
}
