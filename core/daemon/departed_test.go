package daemon

import (
	"net/netip"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/core/mesh"
	"github.com/ployz/ployz/sdk/store"
)

func testPeer(t *testing.T, subnet string) mesh.Peer {
	t.Helper()
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return mesh.Peer{PublicKey: k.PublicKey(), Subnet: netip.MustParsePrefix(subnet)}
}

func TestDepartedPeersKeptForTheGrace(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	dp := newDepartedPeers()
	dp.now = func() time.Time { return now }
	a, b := testPeer(t, "10.210.1.0/24"), testPeer(t, "10.210.2.0/24")
	if got, next := dp.merge([]mesh.Peer{a, b}); len(got) != 2 || !next.IsZero() {
		t.Fatalf("both current: %d peers, next %v", len(got), next)
	}
	now = now.Add(10 * time.Second)
	got, next := dp.merge([]mesh.Peer{a})
	if len(got) != 2 || got[1].PublicKey != b.PublicKey {
		t.Fatalf("b's row vanished 0 s ago: %d peers, want b kept", len(got))
	}
	if want := t0.Add(departedGrace); !next.Equal(want) { // last seen at t0
		t.Fatalf("next expiry %v, want %v", next, want)
	}
	now = t0.Add(departedGrace - time.Second)
	if got, _ := dp.merge([]mesh.Peer{a}); len(got) != 2 {
		t.Fatal("b dropped before the grace ended")
	}
	// b's row is back: it counts from now again.
	if got, _ := dp.merge([]mesh.Peer{a, b}); len(got) != 2 {
		t.Fatal("b back: want 2 peers")
	}
	now = now.Add(departedGrace)
	if got, next := dp.merge([]mesh.Peer{a}); len(got) != 1 || !next.IsZero() {
		t.Fatalf("after the grace: %d peers, next %v; want b dropped", len(got), next)
	}
}

func TestDepartedPeerYieldsItsSubnet(t *testing.T) {
	dp := newDepartedPeers()
	old := testPeer(t, "10.210.3.0/24")
	dp.merge([]mesh.Peer{old})
	replacement := testPeer(t, "10.210.3.0/24")
	got, _ := dp.merge([]mesh.Peer{replacement})
	if len(got) != 1 || got[0].PublicKey != replacement.PublicKey {
		t.Fatalf("a departed peer kept a subnet a current Machine holds: %d peers", len(got))
	}
}

// A member can delete another Machine's row: the Machine notices its own
// row is gone and writes it again, unless it is leaving the Cluster.
func TestSelfRowStaleWhenDeleted(t *testing.T) {
	d := &Daemon{rec: machine.Record{ID: "m1", Phase: machine.Participating}}
	other := []trust.Verdict{{Row: store.Row[store.MachineBody]{Key: "m2"}, Status: trust.Signed}}
	if !d.selfRowStale(other) {
		t.Fatal("own row deleted while participating: not written again")
	}
	if !d.selfRowStale(nil) {
		t.Fatal("an empty machines table while participating: own row not written again")
	}
	mine := append(other, trust.Verdict{Row: store.Row[store.MachineBody]{Key: "m1"}, Status: trust.Signed})
	if d.selfRowStale(mine) {
		t.Fatal("own row present: written again anyway")
	}
	d.rec.Phase = machine.Resetting
	if d.selfRowStale(other) {
		t.Fatal("a resetting Machine wrote its deleted row back")
	}
}
