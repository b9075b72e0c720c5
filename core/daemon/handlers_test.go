package daemon

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/observe"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// units records what the daemon asks of systemd (the test host runs no
// systemd); a name in fail makes that call fail.
type units struct {
	mu    sync.Mutex
	calls []string
	fail  map[string]error
}

func (u *units) do(verb, name string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, verb+" "+name)
	return u.fail[name]
}

func (u *units) Start(_ context.Context, name string) error   { return u.do("start", name) }
func (u *units) Restart(_ context.Context, name string) error { return u.do("restart", name) }
func (u *units) Stop(_ context.Context, name string) error    { return u.do("stop", name) }
func (u *units) Reload(context.Context) error                 { return u.do("reload", "") }

func (u *units) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// machineDaemon is storeDaemon made whole enough for the Machine handlers:
// an RPC server (capabilities), an empty plugin host, this Cluster's
// secret, an RPC identity, a subnet, and recorded systemd units.
func machineDaemon(t *testing.T, self string) (*Daemon, *sdkstore.Client, *units) {
	t.Helper()
	d, st := storeDaemon(t, self)
	u := &units{}
	d.cfg.Units = u
	d.cfg.defaults()
	d.rpc = rpc.NewServer(rpc.Options{Local: d.local})
	h, err := pluginhost.New(pluginhost.Config{Dir: t.TempDir(), SocketDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	d.plugins = h
	secret, err := sdkstore.NewClusterSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.saveClusterSecret(secret); err != nil {
		t.Fatal(err)
	}
	if d.identity, err = rpc.LoadOrCreateIdentity(filepath.Join(d.cfg.DataDir, rpc.IdentityFile)); err != nil {
		t.Fatal(err)
	}
	d.rec.Network = netip.MustParsePrefix("10.210.0.0/16")
	d.rec.Subnet = netip.MustParsePrefix("10.210.1.0/24")
	return d, st, u
}

// wantField fails unless err is an invalid_argument naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal naming %q", field)
	}
	if featuretest.Code(err) != rpc.CodeInvalidArgument || featuretest.Detail(err, "field") != field {
		t.Fatalf("refusal %v (code %q, field %v); want invalid_argument naming %q", err, featuretest.Code(err), featuretest.Detail(err, "field"), field)
	}
}

func newKey(t *testing.T) wgtypes.Key {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey()
}

func TestParseEnrollmentNamesField(t *testing.T) {
	for _, tc := range []struct {
		name, network, subnet string
		endpoints             []string
		field                 string
	}{
		{"", "10.210.0.0/16", "10.210.1.0/24", nil, "name"},
		{"m1", "10.210.0.0", "10.210.1.0/24", nil, "network"},
		{"m1", "10.210.0.0/16", "10.210.1.0/25", nil, "subnet"},
		{"m1", "10.210.0.0/16", "10.211.1.0/24", nil, "subnet"},
		{"m1", "10.210.0.0/16", "nonsense", nil, "subnet"},
		{"m1", "10.210.0.0/16", "10.210.1.0/24", []string{"1.2.3.4"}, "endpoints"},
	} {
		_, _, _, err := parseEnrollment(tc.name, tc.network, tc.subnet, tc.endpoints)
		wantField(t, err, tc.field)
	}
	n, s, eps, err := parseEnrollment("m1", "10.210.0.0/16", "10.210.1.7/24", []string{"192.0.2.1:51820"})
	if err != nil {
		t.Fatal(err)
	}
	if n.String() != "10.210.0.0/16" || s.String() != "10.210.1.0/24" || len(eps) != 1 || eps[0].String() != "192.0.2.1:51820" {
		t.Fatalf("parsed %v %v %v", n, s, eps)
	}
}

// TestPublishMachine writes a joiner's row as the entry does: phase
// joining, the management address derived from its key, its rpc_key; and
// hands back the store's versions and this Cluster's secret.
func TestPublishMachine(t *testing.T) {
	d, st, _ := machineDaemon(t, "entry")
	ctx := context.Background()
	key := newKey(t)
	good := rpc.PublishMachineRequest{ID: "joiner", Name: "m2", PublicKey: key.String(), Subnet: "10.210.2.0/24", Endpoints: []string{"192.0.2.2:51820"}, RPCKey: d.identity.PublicKey()}
	for field, mutate := range map[string]func(*rpc.PublishMachineRequest){
		"id":         func(r *rpc.PublishMachineRequest) { r.ID = "" },
		"public_key": func(r *rpc.PublishMachineRequest) { r.PublicKey = "not-a-key" },
		"subnet":     func(r *rpc.PublishMachineRequest) { r.Subnet = "10.210.2.0" },
		"rpc_key":    func(r *rpc.PublishMachineRequest) { r.RPCKey = "ed25519:zz" },
	} {
		req := good
		mutate(&req)
		_, err := hcall(t, featuretest.Typed(d.publishMachine), req)
		wantField(t, err, field)
	}
	if rows, _ := st.Machines().List(ctx); len(rows) != 0 {
		t.Fatalf("a refused request wrote %d machines rows", len(rows))
	}

	res, err := hcall(t, featuretest.Typed(d.publishMachine), good)
	if err != nil {
		t.Fatal(err)
	}
	out := res.(rpc.MachinePublished)
	secret, err := store.LoadClusterSecret(d.cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	if out.ClusterSecret != secret.Hex() {
		t.Fatalf("cluster_secret %v, want this Cluster's", out.ClusterSecret)
	}
	h, err := st.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := out.StoreVersions; v[h.ActorID] < 1 {
		t.Fatalf("store_versions %v does not include the joiner's row (site %s)", v, h.ActorID)
	}
	row, ok, err := st.Machines().Get(ctx, "joiner")
	if err != nil || !ok {
		t.Fatalf("joiner row: ok=%v err=%v", ok, err)
	}
	b := row.Body
	if b.Phase != string(machine.Joining) || b.ManagementIP != meshaddr.ManagementIP(key).String() || b.RPCKey != good.RPCKey ||
		b.Name != "m2" || b.Subnet != "10.210.2.0/24" || row.Owner != "joiner" {
		t.Fatalf("joiner row %+v owner %s", b, row.Owner)
	}

	// Without a Cluster secret the joiner could not reach gossip: refused.
	if err := os.Remove(store.ClusterSecretPath(d.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	other := good
	other.ID, other.Name = "joiner2", "m3"
	if _, err := hcall(t, featuretest.Typed(d.publishMachine), other); featuretest.Code(err) != rpc.CodeFailedPrecond {
		t.Fatalf("no secret: %v", err)
	}
	if _, ok, _ := st.Machines().Get(ctx, "joiner2"); ok {
		t.Fatal("a call refused for want of a Cluster secret left the joiner's row behind")
	}
	// A Machine with no store refuses before writing anything.
	d.active = nil
	if _, err := hcall(t, featuretest.Typed(d.publishMachine), good); featuretest.Code(err) != rpc.CodeFailedPrecond {
		t.Fatalf("no store: %v", err)
	}
}

// TestForgetMachine deletes exactly the forgotten Machine's rows.
func TestForgetMachine(t *testing.T) {
	d, st, _ := machineDaemon(t, "m1")
	ctx := context.Background()
	for _, id := range []string{"gone", "kept"} {
		featuretest.PutMachine(t, st, id, id, machine.Participating)
		featuretest.PutAck(t, st, id, "ns/web", "p1")
		if _, err := st.Containers().Put(ctx, sdkstore.Row[sdkstore.ContainerBody]{Key: "c-" + id, Owner: id, Body: sdkstore.ContainerBody{State: "running"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Volumes(st).Put(ctx, sdkstore.Row[store.VolumeBody]{Key: id + "/data", Owner: id, Body: store.VolumeBody{Name: "data"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := hcall(t, featuretest.Typed(d.forgetMachine), rpc.ForgetMachineRequest{})
	wantField(t, err, "id")
	if _, err := hcall(t, featuretest.Typed(d.forgetMachine), rpc.ForgetMachineRequest{ID: "gone"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gone", "kept"} {
		want := id == "kept"
		if _, ok, _ := st.Machines().Get(ctx, id); ok != want {
			t.Errorf("machines %s present=%v", id, ok)
		}
		if _, ok, _ := st.ServingAcks().Get(ctx, id); ok != want {
			t.Errorf("serving_acks %s present=%v", id, ok)
		}
		if rows, _ := st.Containers().ListByOwner(ctx, id); (len(rows) == 1) != want {
			t.Errorf("containers of %s: %d rows", id, len(rows))
		}
		if rows, _ := store.Volumes(st).ListByOwner(ctx, id); (len(rows) == 1) != want {
			t.Errorf("volumes of %s: %d rows", id, len(rows))
		}
	}
}

// TestUpdateMachine renames and relabels: the record on disk, the answer
// and this Machine's row all change; bad input names the field and
// changes nothing.
func TestUpdateMachine(t *testing.T) {
	d, st, _ := machineDaemon(t, "m1")
	ctx := context.Background()
	empty := ""
	_, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{Name: &empty})
	wantField(t, err, "name")
	_, err = hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsAdd: map[string]string{"": "x"}})
	wantField(t, err, "labels_add")
	if _, ok, _ := st.Machines().Get(ctx, "m1"); ok {
		t.Fatal("a refused update published the row")
	}

	name := "renamed"
	res, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{Name: &name, LabelsAdd: map[string]string{"zone": "b", "gpu": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsRemove: []string{"gpu"}}); err != nil {
		t.Fatal(err)
	}
	in := res.(rpc.Inspection)
	if in.Name != "renamed" || in.Labels["zone"] != "b" || in.Subnet != "10.210.1.0/24" || in.RPCKey != d.identity.PublicKey() {
		t.Fatalf("inspection %+v", in)
	}
	saved, err := machine.Load(d.recordPath())
	if err != nil {
		t.Fatal(err)
	}
	if saved.Name != "renamed" || saved.Labels["zone"] != "b" || saved.Labels["gpu"] != "" {
		t.Fatalf("saved record %+v", saved)
	}
	row, ok, err := st.Machines().Get(ctx, "m1")
	if err != nil || !ok {
		t.Fatalf("row: %v %v", ok, err)
	}
	h, _ := st.Health(ctx)
	k, _ := d.publicKey()
	if row.Body.Name != "renamed" || row.Body.Labels["zone"] != "b" || len(row.Body.Labels) != 1 || row.Body.StoreSite != h.ActorID ||
		row.Body.PublicKey != k.String() || row.Body.RPCKey != d.identity.PublicKey() || row.Body.Phase != string(machine.Participating) {
		t.Fatalf("row %+v", row.Body)
	}
}

// TestListMachinesAndPeers: self is "self", a Machine the store's gossip
// does not know is "unknown"; forwarding targets carry the management
// address on the RPC port and the published rpc_key.
func TestListMachinesAndPeers(t *testing.T) {
	d, st, _ := machineDaemon(t, "m1")
	ctx := context.Background()
	if err := d.publishSelf(ctx); err != nil {
		t.Fatal(err)
	}
	key := newKey(t)
	if _, err := st.Machines().Put(ctx, sdkstore.Row[sdkstore.MachineBody]{Key: "m2", Owner: "m2", Body: sdkstore.MachineBody{
		Name: "two", ManagementIP: meshaddr.ManagementIP(key).String(), RPCKey: "ed25519:k2", Phase: "participating", StoreSite: "site-2"}}); err != nil {
		t.Fatal(err)
	}
	res, err := hcall(t, featuretest.Typed(d.listMachines), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := res.(rpc.MachineList)
	got := map[string]string{}
	for _, m := range l.Machines {
		got[m.ID] = m.Membership
	}
	if l.ObserverID != "m1" || got["m1"] != "self" || got["m2"] != "unknown" || len(got) != 2 {
		t.Fatalf("list %+v", l)
	}
	peers, err := d.peers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p2 rpc.Peer
	for _, p := range peers {
		if p.ID == "m2" {
			p2 = p
		}
	}
	if want := netip.AddrPortFrom(meshaddr.ManagementIP(key), RPCPort).String(); p2.Address != want || p2.RPCKey != "ed25519:k2" || p2.Name != "two" {
		t.Fatalf("peer m2 %+v, want address %s", p2, want)
	}

	// No store: the only target is this Machine itself.
	d.active = nil
	peers, err = d.peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].ID != "m1" {
		t.Fatalf("peers without a store: %+v %v", peers, err)
	}
	if _, err := hcall(t, featuretest.Typed(d.listMachines), nil); featuretest.Code(err) != rpc.CodeFailedPrecond {
		t.Fatalf("list without a store: %v", err)
	}
}

// TestEnrollmentRefusals: initialize and join refuse a Machine already in
// a Cluster (naming its phase) and a join missing what a joiner needs,
// naming the field, before anything is saved.
func TestEnrollmentRefusals(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	_, err := hcall(t, featuretest.Typed(d.initialize), rpc.InitializeRequest{Name: "m1", Network: "10.210.0.0/16", Subnet: "10.210.1.0/24"})
	if featuretest.Code(err) != rpc.CodeConflict || featuretest.Detail(err, "phase") != machine.Participating {
		t.Fatalf("initialize a participating Machine: %v", err)
	}
	join := rpc.JoinRequest{Name: "m1", Network: "10.210.0.0/16", Subnet: "10.210.3.0/24",
		Peers: []machine.Peer{{ID: "m0", PublicKey: newKey(t).String(), Subnet: netip.MustParsePrefix("10.210.1.0/24")}}}
	if _, err := hcall(t, featuretest.Typed(d.join), join); featuretest.Code(err) != rpc.CodeConflict {
		t.Fatalf("join a participating Machine: %v", err)
	}

	d.rec = machine.Record{ID: "m1", Phase: machine.Uninitialized}
	_, err = hcall(t, featuretest.Typed(d.initialize), rpc.InitializeRequest{Network: "10.210.0.0/16", Subnet: "10.210.1.0/24"})
	wantField(t, err, "name")
	secret, _ := sdkstore.NewClusterSecret()
	for field, mutate := range map[string]func(*rpc.JoinRequest){
		"name":                func(r *rpc.JoinRequest) { r.Name = "" },
		"subnet":              func(r *rpc.JoinRequest) { r.Subnet = "10.9.0.0/24" },
		"peers":               func(r *rpc.JoinRequest) { r.Peers = nil },
		"peers[0].public_key": func(r *rpc.JoinRequest) { r.Peers = []machine.Peer{{ID: "m0", PublicKey: "nope"}} },
		"cluster_secret":      func(r *rpc.JoinRequest) { r.ClusterSecret = "abc" },
	} {
		req := join
		req.ClusterSecret = secret.Hex()
		mutate(&req)
		_, err := hcall(t, featuretest.Typed(d.join), req)
		wantField(t, err, field)
	}
	if _, err := os.Stat(d.recordPath()); !errors.Is(err, os.ErrNotExist) || d.record().Phase != machine.Uninitialized {
		t.Fatalf("a refused enrollment saved a record (%v) or changed phase (%s)", err, d.record().Phase)
	}
	if _, err := os.Stat(store.ClusterSecretPath(d.cfg.DataDir)); err != nil {
		t.Fatalf("a refused join touched the Cluster secret: %v", err)
	}
}

// TestJoinResumesUntilCaughtUp: a joining Machine whose store has not yet
// reached its target versions stays joining; once it has, the join loop
// saves it participating (dropping the target) and asks for its row to be
// published, and a retried join answers participating.
func TestJoinResumesUntilCaughtUp(t *testing.T) {
	d, st, _ := machineDaemon(t, "m1")
	ctx := context.Background()
	h, err := st.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	target := map[string]int64{h.ActorID: h.Vector[h.ActorID] + 2}
	rec := d.record()
	rec.Name, rec.Phase, rec.TargetVersions = "m1", machine.Joining, target
	if err := d.setRecord(rec); err != nil {
		t.Fatal(err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { d.joinLoop(loopCtx); close(done) }()

	// The same join again, while the store is behind: it waits its
	// wait_seconds and answers still joining.
	req := rpc.JoinRequest{Name: "m1", Network: "10.210.0.0/16", Subnet: "10.210.1.0/24", WaitSeconds: 1}
	res, err := hcall(t, featuretest.Typed(d.join), req)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.(rpc.Inspection).Phase; p != machine.Joining {
		t.Fatalf("behind its target: phase %s", p)
	}
	featuretest.PutMachine(t, st, "x1", "x1", machine.Participating)
	featuretest.PutMachine(t, st, "x2", "x2", machine.Participating)
	req.WaitSeconds = 10
	res, err = hcall(t, featuretest.Typed(d.join), req)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.(rpc.Inspection).Phase; p != machine.Participating {
		t.Fatalf("caught up: phase %s", p)
	}
	<-done
	saved, err := machine.Load(d.recordPath())
	if err != nil {
		t.Fatal(err)
	}
	if saved.Phase != machine.Participating || saved.TargetVersions != nil {
		t.Fatalf("saved %+v", saved)
	}
	select {
	case <-d.republish():
	default:
		t.Fatal("participating without asking for its row to be published")
	}
}

// TestResetFinishes: reset saves phase resetting before it answers; the
// teardown then withdraws the serving and metrics plugins' files, stops the store,
// WireGuard and plugin units, removes the input filter, the store's state
// and the WireGuard key, and saves a fresh uninitialized record with a
// new ID.
func TestResetFinishes(t *testing.T) {
	d, _, u := machineDaemon(t, "m1")
	files := t.TempDir()
	prevDNS, prevIngress, prevMetrics, prevChain := dnsSpecFile, ingressSpecFile, metricsSpecFile, inputChainPrefix
	t.Cleanup(func() {
		dnsSpecFile, ingressSpecFile, metricsSpecFile, inputChainPrefix = prevDNS, prevIngress, prevMetrics, prevChain
	})
	dnsSpecFile, ingressSpecFile = filepath.Join(files, "dns.json"), filepath.Join(files, "ingress.json")
	metricsSpecFile = filepath.Join(files, "metrics.json")
	inputChainPrefix = "PZR" + machine.NewID()[:6]
	chain := testInputChain(t, inputChainPrefix)

	for _, p := range []string{dnsSpecFile, ingressSpecFile, metricsSpecFile, d.serving().IngressStatusPath(), d.obs().CountersPath(), filepath.Join(d.cfg.DataDir, "endpoints.json")} {
		if err := os.WriteFile(p, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.publicKey(); err != nil { // creates the key
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.cfg.DataDir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.active = nil // no mesh or listener to stop in this test
	res, err := hcall(t, featuretest.Typed(d.reset), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.(rpc.Inspection).Phase != machine.Resetting {
		t.Fatalf("answer %+v", res)
	}
	if saved, _ := machine.Load(d.recordPath()); saved.Phase != machine.Resetting || saved.ID != "m1" {
		t.Fatalf("phase resetting was not saved before the answer: %s", saved.Phase)
	}
	deadline := time.Now().Add(20 * time.Second)
	for d.record().Phase != machine.Uninitialized {
		if time.Now().After(deadline) {
			t.Fatalf("reset did not finish: phase %s", d.record().Phase)
		}
		time.Sleep(50 * time.Millisecond)
	}
	saved, err := machine.Load(d.recordPath())
	if err != nil {
		t.Fatal(err)
	}
	if saved.Phase != machine.Uninitialized || saved.ID == "m1" || saved.ID == "" || saved.Subnet.IsValid() {
		t.Fatalf("saved after reset %+v", saved)
	}
	for _, p := range []string{dnsSpecFile, ingressSpecFile, metricsSpecFile, d.serving().IngressStatusPath(), d.obs().CountersPath(), filepath.Join(d.cfg.DataDir, "endpoints.json"),
		filepath.Join(d.cfg.DataDir, "store"), d.keyPath()} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the reset (%v)", p, err)
		}
	}
	calls := u.seen()
	for _, want := range []string{"stop " + pluginhost.UnitName(DNSPlugin), "stop " + pluginhost.UnitName(IngressPlugin),
		"stop " + pluginhost.UnitName(MetricsPlugin), "stop " + StoreUnit, "stop " + WireGuardUnit} {
		if !slices.Contains(calls, want) {
			t.Errorf("units %v lack %q", calls, want)
		}
	}
	if err := exec.Command("iptables", "-t", "filter", "-S", chain).Run(); err == nil {
		t.Errorf("input chain %s survived the reset", chain)
	}
}

// testInputChain makes an empty input chain under prefix, jumped to from
// INPUT as the mesh's would be (an empty chain lets everything through),
// and pins dockernet to plain iptables so the reset looks there.
func testInputChain(t *testing.T, prefix string) string {
	t.Helper()
	prereq.Root(t, "an iptables input chain")
	prereq.Command(t, "iptables")
	t.Setenv(dockernet.EnvIptables, "iptables")
	chain := prefix + "-INPUT"
	for _, args := range [][]string{{"-N", chain}, {"-A", "INPUT", "-j", chain}} {
		if out, err := exec.Command("iptables", append([]string{"-t", "filter"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("iptables %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("iptables", "-t", "filter", "-D", "INPUT", "-j", chain).Run() // gone when the test passed
		exec.Command("iptables", "-t", "filter", "-X", chain).Run()                // gone when the test passed
	})
	return chain
}

// TestObserveBudgetLabel: a budget label that is not a size is refused
// naming it; a good one reaches the logstore's spec (and a removed one
// gives the default back).
func TestObserveBudgetLabel(t *testing.T) {
	d, _, _ := machineDaemon(t, "m1")
	_, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsAdd: map[string]string{observe.BudgetLabel: "lots"}})
	wantField(t, err, "labels_add."+observe.BudgetLabel)
	if _, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsAdd: map[string]string{observe.BudgetLabel: "8MiB"}}); err != nil {
		t.Fatal(err)
	}
	spec := func() observe.Spec {
		b, err := d.obs().LogStoreSpec()
		if err != nil {
			t.Fatal(err)
		}
		s, err := observe.ParseSpec(b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := spec(); s.Budget.MaxBytes != 8<<20 || s.MachineID != d.record().ID {
		t.Fatalf("logstore spec %+v", s)
	}
	if _, err := hcall(t, featuretest.Typed(d.updateMachine), rpc.UpdateMachineRequest{LabelsRemove: []string{observe.BudgetLabel}}); err != nil {
		t.Fatal(err)
	}
	if s := spec(); s.Budget.MaxBytes != observe.DefaultMaxBytes {
		t.Fatalf("after the label went: %+v", s)
	}
}
