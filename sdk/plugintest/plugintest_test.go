package plugintest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/plugintest"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

const examplePkg = "github.com/ployz/ployz/sdk/example"

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestExampleManaged runs the example plugin as a managed child and calls
// Info, Configure and its DNS service.
func TestExampleManaged(t *testing.T) {
	bin := exampleBin
	p := plugintest.Start(t, bin)
	if p.Info.GetName() != "example" || p.Info.GetKind() != sdk.KindDNS {
		t.Fatalf("Info = %v", p.Info)
	}
	if !slices.Equal(p.Info.GetCapabilities(), []string{"example.dns.spec-store.v1"}) {
		t.Fatalf("capabilities = %v", p.Info.GetCapabilities())
	}
	if v := p.Configure(t, []byte(`{"listen_addrs":["10.210.0.1:53"]}`)); v != sdk.APIVersion1 {
		t.Fatalf("negotiated %d", v)
	}
	dns := dnsv1.NewDNSClient(p.Conn)
	if _, err := dns.ApplySpec(ctx(t), &dnsv1.ApplySpecRequest{Spec: []byte("not json")}); err == nil {
		t.Fatal("ApplySpec accepted invalid JSON")
	}
	applied, err := dns.ApplySpec(ctx(t), &dnsv1.ApplySpecRequest{Spec: []byte(`{"records":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	st, err := dns.Status(ctx(t), &dnsv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.GetServing() || st.GetSpecSha256() != applied.GetSpecSha256() || !slices.Equal(st.GetListenAddrs(), []string{"10.210.0.1:53"}) {
		t.Fatalf("Status = %v", st)
	}
}

// TestExampleLongLived serves the example on a socket as its own process,
// attaches, detaches, attaches again to the same pid, then stops it with
// SIGTERM and checks it cleaned up after itself.
func TestExampleLongLived(t *testing.T) {
	bin := exampleBin
	socket := filepath.Join(t.TempDir(), "example.sock")
	cmd := plugintest.ServeLongLived(t, bin, socket)

	first := plugintest.Attach(t, socket)
	if first.Info.GetPid() != int64(cmd.Process.Pid) {
		t.Fatalf("Info pid %d, process %d", first.Info.GetPid(), cmd.Process.Pid)
	}
	first.Configure(t, nil)
	if _, err := dnsv1.NewDNSClient(first.Conn).ApplySpec(ctx(t), &dnsv1.ApplySpecRequest{Spec: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// The first host goes away; the plugin keeps its state and its pid.
	first.Client.Kill() // a no-op for a reattached long-lived plugin
	_ = first.Conn.Close()

	second := plugintest.Attach(t, socket)
	if second.Info.GetPid() != first.Info.GetPid() {
		t.Fatalf("re-attached to pid %d, want %d", second.Info.GetPid(), first.Info.GetPid())
	}
	st, err := dnsv1.NewDNSClient(second.Conn).Status(ctx(t), &dnsv1.StatusRequest{})
	if err != nil || !st.GetServing() {
		t.Fatalf("Status after re-attach = %v, %v", st, err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, errS := os.Stat(socket)
		_, errR := os.Stat(sdk.ReattachPath(socket))
		if os.IsNotExist(errS) && os.IsNotExist(errR) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGTERM socket/record still present: %v %v", errS, errR)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeRefusesBusySocket checks a second long-lived process cannot take
// over a socket a live plugin serves.
func TestServeRefusesBusySocket(t *testing.T) {
	bin := exampleBin
	socket := filepath.Join(t.TempDir(), "example.sock")
	plugintest.ServeLongLived(t, bin, socket)
	out, err := runOutput(bin, "serve", "--socket", socket)
	if err == nil {
		t.Fatal("second serve on a busy socket succeeded")
	}
	if !contains(out, "already served") {
		t.Fatalf("error output does not say the socket is busy:\n%s", out)
	}
}
