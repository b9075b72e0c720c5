package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/plugins/dns/internal/dns"
	"github.com/ployz/ployz/sdk/plugintest"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
	"github.com/ployz/ployz/sdk/store"
)

// TestBinaryServesAndAdvertises builds ployz-dns and runs it the way
// ployz-plugin@dns.service does (`serve --socket`) with no spec yet: the
// plugin socket answers at once, the spec arrives through Configure, DNS
// answers from a real store; a restarted process serves the kept spec
// without being configured again. --probe and info work.
func TestBinaryServesAndAdvertises(t *testing.T) {
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/dns")
	if out, err := exec.Command(bin, "--probe").CombinedOutput(); err != nil {
		t.Fatalf("--probe: %v %s", err, out)
	}
	if out, _ := exec.Command(bin, "info").Output(); !strings.Contains(string(out), dns.Capability) {
		t.Fatalf("info: %s", out)
	}

	dir := t.TempDir()
	node := storetest.Start(t)
	api := node.API()
	st := store.New(api, store.WithToken(node.Token()))
	if _, err := st.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: "m1", Owner: "m1",
		Body: store.MachineBody{Phase: "participating", Subnet: "10.210.1.0/24"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Containers().Put(context.Background(), store.Row[store.ContainerBody]{Key: "c1", Owner: "m1",
		Body: store.ContainerBody{Service: "api", Namespace: "demo", IP: "10.210.1.5", Ready: true}}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600)
	listen := freePort(t)
	spec, _ := json.Marshal(map[string]any{"machine": "m1", "listen": listen, "subnet": "127.0.0.0/8",
		"store_api": api, "store_token_file": filepath.Join(dir, "token")})
	os.WriteFile(filepath.Join(dir, "dns.json"), spec, 0o644) // for --probe only
	if out, err := exec.Command(bin, "--probe", "--spec", filepath.Join(dir, "dns.json")).CombinedOutput(); err != nil {
		t.Fatalf("--probe --spec: %v %s", err, out)
	}

	socket := filepath.Join(dir, "dns.sock")
	specPath := filepath.Join(dir, "kept", "dns.json")
	serve := func() *exec.Cmd { return plugintest.ServeLongLived(t, bin, socket, "--spec", specPath) }
	query := func() {
		t.Helper()
		m := new(miekg.Msg)
		m.SetQuestion("api.demo.internal.", miekg.TypeA)
		var r *miekg.Msg
		var err error
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			// Until DNS binds, a client socket may get the listen port as
			// its own ephemeral port and read its own query back: only a
			// response counts.
			if r, _, err = (&miekg.Client{Timeout: 300 * time.Millisecond}).Exchange(m, listen); err == nil && r.Response {
				break
			}
		}
		if err != nil || len(r.Answer) != 1 || r.Answer[0].(*miekg.A).A.String() != "10.210.1.5" {
			t.Fatalf("query: %v %v", r, err)
		}
	}

	first := serve()
	p := plugintest.Attach(t, socket)
	if caps := p.Info.GetCapabilities(); len(caps) != 1 || caps[0] != dns.Capability {
		t.Fatalf("capabilities %v", caps)
	}
	if s, err := dnsv1.NewDNSClient(p.Conn).Status(context.Background(), &dnsv1.StatusRequest{}); err != nil || s.GetServing() {
		t.Fatalf("Status before any spec = %v %v", s, err)
	}
	p.Configure(t, nil) // a host with nothing to say changes nothing
	if _, err := os.Stat(specPath); !os.IsNotExist(err) {
		t.Fatalf("an empty Configure kept a spec: %v", err)
	}
	if _, err := p.Base.Configure(context.Background(), &pluginv1.ConfigureRequest{ApiVersion: 1, Config: []byte(`{"listen":"nonsense"}`)}); err == nil ||
		!strings.Contains(err.Error(), `field "machine"`) {
		t.Fatalf("a bad spec must be refused naming the field: %v", err)
	}
	p.Configure(t, spec)
	query()
	// Status reports serving right after the first load starts answering.
	var (
		s   *dnsv1.StatusResponse
		err error
	)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s, err = dnsv1.NewDNSClient(p.Conn).Status(context.Background(), &dnsv1.StatusRequest{}); err == nil && s.GetServing() {
			break
		}
	}
	if err != nil || !s.GetServing() || s.GetListenAddrs()[0] != listen || s.GetSpecSha256() == "" {
		t.Fatalf("Status = %v %v", s, err)
	}

	// A restart serves the kept spec with no host configuring it.
	first.Process.Signal(os.Interrupt)
	waitExit(t, first.Process.Pid)
	serve()
	query()
}

func freePort(t *testing.T) string {
	for {
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp4", pc.LocalAddr().String())
		pc.Close()
		if err == nil {
			l.Close()
			return pc.LocalAddr().String()
		}
	}
}

// waitExit waits until pid, a child plugintest reaps, has exited.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Fatalf("pid %d did not exit", pid)
}
