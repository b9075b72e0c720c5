package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/internal/version"
	"github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// TestPeersFromRows: every other Machine with a usable key and subnet is a
// peer with its parseable endpoints; this Machine and broken rows are not.
func TestPeersFromRows(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	rows := []store.Row[store.MachineBody]{
		{Key: "self", Body: store.MachineBody{PublicKey: newKey(t).String(), Subnet: "10.210.1.0/24"}},
		{Key: "m2", Body: store.MachineBody{PublicKey: k1.String(), Subnet: "10.210.2.0/24", Endpoints: []string{"192.0.2.2:51820", "garbage"}}},
		{Key: "m3", Body: store.MachineBody{PublicKey: k2.String(), Subnet: "10.210.3.0/24"}},
		{Key: "badkey", Body: store.MachineBody{PublicKey: "nope", Subnet: "10.210.4.0/24"}},
		{Key: "badsubnet", Body: store.MachineBody{PublicKey: newKey(t).String(), Subnet: "10.210.5.0"}},
	}
	got := peersFromRows(rows, "self")
	if len(got) != 2 || got[0].PublicKey != k1 || got[0].Subnet.String() != "10.210.2.0/24" || len(got[0].Endpoints) != 1 ||
		got[0].Endpoints[0].String() != "192.0.2.2:51820" || got[1].PublicKey != k2 {
		t.Fatalf("peers %+v", got)
	}
	// Join peers add Machines the table does not list yet, never twice.
	join := meshPeers([]machine.Peer{
		{PublicKey: k1.String(), Subnet: netip.MustParsePrefix("10.210.2.0/24")},
		{PublicKey: newKey(t).String(), Subnet: netip.MustParsePrefix("10.210.6.0/24")},
		{PublicKey: "nope", Subnet: netip.MustParsePrefix("10.210.7.0/24")},
		{PublicKey: newKey(t).String()},
	})
	if len(join) != 2 {
		t.Fatalf("join peers %+v: want the two usable ones", join)
	}
	merged := mergePeers(got, join)
	if len(merged) != 3 {
		t.Fatalf("merged %d peers, want 3", len(merged))
	}
	// The key ignores order, so an unchanged set never touches WireGuard.
	if peerKey(merged) != peerKey([]mesh.Peer{merged[2], merged[0], merged[1]}) || peerKey(merged) == peerKey(got) {
		t.Fatal("peerKey depends on order or misses a change")
	}
	if gossipAddr(k1.String()) != netip.AddrPortFrom(meshaddr.ManagementIP(k1), GossipPort).String() || gossipAddr("nope") != "" {
		t.Fatalf("gossipAddr %q", gossipAddr(k1.String()))
	}
}

// TestPublishLoop writes this Machine's row at once, again whenever it is
// kicked, and never while the Machine is resetting.
func TestPublishLoop(t *testing.T) {
	d, st, _ := machineDaemon(t, "m1")
	d.rec.Name = "first"
	d.rec.Endpoints = []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:51820")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.publishLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	row := waitMachineRow(t, st, "m1", func(b store.MachineBody) bool { return b.Name == "first" })
	k, _ := d.publicKey()
	h, _ := st.Health(context.Background())
	b := row.Body
	if b.PublicKey != k.String() || b.ManagementIP != meshaddr.ManagementIP(k).String() || b.Subnet != "10.210.1.0/24" ||
		b.Version != version.Version || b.StoreSite != h.ActorID || b.Session == "" || len(b.Capabilities) == 0 ||
		strings.Join(b.Endpoints, ",") != "192.0.2.1:51820" || row.Owner != "m1" {
		t.Fatalf("row %+v", b)
	}
	rec := d.record()
	rec.Name = "second"
	d.mu.Lock()
	d.rec = rec
	d.mu.Unlock()
	d.kickPublish()
	d.kickPublish() // a second kick while one is pending is dropped, not blocked on
	waitMachineRow(t, st, "m1", func(b store.MachineBody) bool { return b.Name == "second" })

	rec.Name, rec.Phase = "third", machine.Resetting
	d.mu.Lock()
	d.rec = rec
	d.mu.Unlock()
	if err := d.publishSelf(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := st.Machines().Get(context.Background(), "m1"); r.Body.Name != "second" {
		t.Fatalf("a resetting Machine republished its row: %+v", r.Body)
	}
}

func waitMachineRow(t *testing.T, st *store.Client, id string, cond func(store.MachineBody) bool) store.Row[store.MachineBody] {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var last store.Row[store.MachineBody]
	for time.Now().Before(deadline) {
		if r, ok, err := st.Machines().Get(context.Background(), id); err == nil && ok {
			if last = r; cond(r.Body) {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("machines row %s never matched; last %+v", id, last.Body)
	return last
}

// TestServingSpecs: the specs handed to the DNS and ingress plugins are
// what those plugins parse, derived from the record; a record without a
// subnet is refused naming the field.
func TestServingSpecs(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	t.Setenv("PLOYZ_ACME_DIRECTORY", "")
	b, err := d.serving().DNSSpec()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dns.ParseSpec(b)
	if err != nil {
		t.Fatalf("the daemon's DNS spec does not parse: %v\n%s", err, b)
	}
	if ds.Machine != "m1" || ds.Listen != "10.210.1.1:53" || ds.Subnet != "10.210.1.0/24" || ds.Network != "10.210.0.0/16" ||
		ds.TrustedMachinesFile != d.trustedMachinesPath() {
		t.Fatalf("dns spec %+v", ds)
	}
	ib, err := d.serving().IngressSpec()
	if err != nil {
		t.Fatal(err)
	}
	is, err := ingress.ParseSpec(ib)
	if err != nil {
		t.Fatalf("the daemon's ingress spec does not parse: %v\n%s", err, ib)
	}
	if is.Machine != "m1" || is.ACME != nil || is.ListenTLS != "" || is.StatusFile != d.serving().IngressStatusPath() ||
		is.TrustedMachinesFile != d.trustedMachinesPath() {
		t.Fatalf("ingress spec %+v", is)
	}
	d.rec.Subnet = netip.Prefix{}
	if _, err := d.serving().DNSSpec(); err == nil || !strings.Contains(err.Error(), `field "listen"`) {
		t.Fatalf("no subnet: %v", err)
	}
	// configure never hands a plugin a spec it would refuse.
	if err := d.serving().Configure(context.Background(), d.serving().DNSPlugin()); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("configure with a bad spec: %v", err)
	}
	d.rec.Subnet = netip.MustParsePrefix("10.210.1.0/24")
	bad := servingfeature.Plugin{Name: "x", Spec: func() ([]byte, error) { return []byte(`{"machine":""}`), nil },
		Check: func(b []byte) error { _, err := dns.ParseSpec(b); return err }}
	if err := d.serving().Configure(context.Background(), bad); err == nil || !strings.HasPrefix(err.Error(), "derived ") {
		t.Fatalf("configure with a spec the plugin refuses: %v", err)
	}
	// The plugin host refuses a plugin it does not run.
	if err := d.serving().Configure(context.Background(), d.serving().DNSPlugin()); err == nil || !strings.Contains(err.Error(), `"dns" is not installed`) {
		t.Fatalf("configure a plugin the host lacks: %v", err)
	}
	t.Setenv("PLOYZ_ACME_DIRECTORY", "https://acme.example/dir")
	t.Setenv("PLOYZ_ACME_EMAIL", "ops@example.com")
	ib, err = d.serving().IngressSpec()
	if err != nil {
		t.Fatal(err)
	}
	if is, err = ingress.ParseSpec(ib); err != nil || is.ACME == nil || is.ListenTLS != IngressListenTLS {
		t.Fatalf("ingress spec with ACME: %+v %v", is, err)
	}
}

// TestKeepConfiguredWaitsForParticipation: a joining Machine derives no
// spec; the moment it participates it does, without waiting for the
// next retry (servingfeature.RetryEvery).
func TestKeepConfiguredWaitsForParticipation(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	d.rec.Phase = machine.Joining
	var derived atomic.Int32
	p := servingfeature.Plugin{Name: "dns", What: "test", Spec: func() ([]byte, error) { derived.Add(1); return d.serving().DNSSpec() },
		Check: func(b []byte) error { _, err := dns.ParseSpec(b); return err }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.serving().Keep(ctx, p); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond)
	if n := derived.Load(); n != 0 {
		t.Fatalf("a joining Machine derived its spec %d times", n)
	}
	rec := d.record()
	rec.Phase = machine.Participating
	if err := d.setRecord(rec); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(servingfeature.RetryEvery / 2)
	for derived.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := derived.Load(); n != 1 {
		t.Fatalf("a Machine that became participating derived its spec %d times within %s, want 1", n, servingfeature.RetryEvery/2)
	}
}

// TestPeerLoop drives a real wireguard-go device from the machines table:
// every other Machine becomes a WireGuard peer, a joining Machine also
// keeps its join peers, and a Machine that leaves the table is dropped.
func TestPeerLoop(t *testing.T) {
	m := testMesh(t)
	d, st, _ := machineDaemon(t, "m1")
	d.active.mesh = m
	d.peerGrace = 3 * peerPeriod
	d.rec.Phase = machine.Joining
	joinKey := newKey(t)
	d.rec.JoinPeers = []machine.Peer{{ID: "m0", PublicKey: joinKey.String(), Subnet: netip.MustParsePrefix("10.249.9.0/24")}}
	k2 := newKey(t)
	if _, err := st.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: "m2", Owner: "m2",
		Body: store.MachineBody{PublicKey: k2.String(), Subnet: "10.249.2.0/24", Endpoints: []string{"198.51.100.2:51820"}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.peerLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitPeers(t, m, map[string]string{k2.String(): "10.249.2.0/24", joinKey.String(): "10.249.9.0/24"})

	d.mu.Lock()
	d.rec.Phase = machine.Participating
	d.mu.Unlock()
	if _, err := st.Machines().Delete(context.Background(), "m2"); err != nil {
		t.Fatal(err)
	}
	// m2 stays a peer for the grace, so a row it writes again could reach
	// this Machine, then goes.
	time.Sleep(peerPeriod)
	if got := peersOf(t, m); len(got) != 1 {
		t.Fatalf("m2 dropped before its grace ended: peers %v", got)
	}
	waitPeers(t, m, map[string]string{})
}

// peersOf is the device's peers: public key → subnet.
func peersOf(t *testing.T, m *mesh.Mesh) map[string]string {
	t.Helper()
	s, err := m.Status()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range s.Peers {
		got[p.PublicKey.String()] = p.Subnet.String()
	}
	return got
}

func waitPeers(t *testing.T, m *mesh.Mesh, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(3 * peerPeriod)
	var got map[string]string
	for time.Now().Before(deadline) {
		got = peersOf(t, m)
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(want)
		if string(a) == string(b) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("mesh peers %v, want %v", got, want)
}

// testMesh is a wireguard-go device of the test's own (name, port and an
// unused /24), removed when the test ends.
func testMesh(t *testing.T) *mesh.Mesh {
	t.Helper()
	prereq.Root(t, "a WireGuard device")
	prereq.File(t, "/dev/net/tun")
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	m, err := mesh.Up(context.Background(), mesh.Config{Interface: "pzt" + machine.NewID()[:8], ListenPort: port, PrivateKey: key,
		Subnet: netip.MustParsePrefix("10.249.1.0/24"), Userspace: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Down() }) // best effort
	return m
}

// TestIngressFollowsAcceptance: a participating Machine whose ployz.accepts
// leaves ingress out derives no ingress spec; the spec and status files
// the proxy kept are removed and its unit stopped (closing its parked
// sockets), the trust list DNS shares stays, and ingress_status says
// off. Accepting ingress again through update_machine configures it at
// once, without waiting for the next retry.
func TestIngressFollowsAcceptance(t *testing.T) {
	d, _, u := machineDaemon(t, "m1")
	files := t.TempDir()
	prev := ingressSpecFile
	t.Cleanup(func() { ingressSpecFile = prev })
	ingressSpecFile = filepath.Join(files, "ingress.json")
	d.rec.Phase = machine.Participating
	d.rec.Labels = map[string]string{rpc.MachineLabelAccepts: rpc.AcceptServices}
	for _, p := range []string{ingressSpecFile, d.serving().IngressStatusPath(), d.trustedMachinesPath()} {
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := d.serving().IngressPlugin()
	derive := p.Spec
	var derived atomic.Int32
	p.Spec = func() ([]byte, error) { derived.Add(1); return derive() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.serving().Keep(ctx, p); close(done) }()
	defer func() { cancel(); <-done }()

	stop := "stop " + pluginhost.UnitName(IngressPlugin)
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(u.seen(), stop) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(u.seen(), stop) {
		t.Fatalf("units %v: the ingress unit was not stopped", u.seen())
	}
	for _, p := range []string{ingressSpecFile, d.serving().IngressStatusPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the withdrawal (%v)", p, err)
		}
	}
	if _, err := os.Stat(d.trustedMachinesPath()); err != nil {
		t.Errorf("the trust list went with ingress: %v", err)
	}
	out, err := hcall(t, featuretest.Handler(t, d.serving().Routes(), rpc.CmdIngressStatus), rpc.IngressStatusRequest{})
	if st, ok := out.(ingress.Status); err != nil || !ok || !st.Off || st.Running || st.MachineID != "m1" {
		t.Fatalf("ingress_status %+v %v, want off", out, err)
	}
	if n := derived.Load(); n != 0 {
		t.Fatalf("the ingress spec was derived %d times on a Machine without ingress", n)
	}

	if _, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsAdd: map[string]string{rpc.MachineLabelAccepts: "services,ingress"}}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(servingfeature.RetryEvery / 2)
	for derived.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if derived.Load() == 0 {
		t.Fatalf("accepting ingress again derived no spec within %s", servingfeature.RetryEvery/2)
	}
	stops := 0
	for _, c := range u.seen() {
		if c == stop {
			stops++
		}
	}
	if stops != 1 {
		t.Errorf("units %v: the ingress unit stopped %d times, want once", u.seen(), stops)
	}
}
