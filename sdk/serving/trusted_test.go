package serving

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/store"
)

// trustedFixture is what testdata/trusted-machines.json says.
var trustedFixture = TrustedMachines{Machines: map[string]TrustedMachine{
	"m1": {Subnet: "10.210.1.0/24", Phase: Participating},
	"m2": {Subnet: "10.210.2.0/24", Phase: Participating},
	"m4": {Subnet: "10.210.4.0/24", Phase: "joining"},
}}

// TestTrustedFixture pins the trust list's format both ways: a file of
// today's shape reads as the fixture says, and WriteTrusted writes it
// byte for byte (plugins of another release read what ployzd writes).
func TestTrustedFixture(t *testing.T) {
	const fixture = "testdata/trusted-machines.json"
	got, err := ReadTrusted(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || !reflect.DeepEqual(*got, trustedFixture) {
		t.Fatalf("read %+v, want %+v", got, trustedFixture)
	}
	path := filepath.Join(t.TempDir(), "run", TrustedFileName)
	if err := WriteTrusted(path, trustedFixture); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(fixture)
	if b, _ := os.ReadFile(path); string(b) != string(want) {
		t.Fatalf("WriteTrusted wrote\n%s\nwant\n%s", b, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600: only root reads it", fi.Mode(), err)
	}
	// Only participating Machines vouch; ids are matched lowercase.
	want2 := map[string]netip.Prefix{"m1": netip.MustParsePrefix("10.210.1.0/24"), "m2": netip.MustParsePrefix("10.210.2.0/24")}
	if s := got.Subnets(); !reflect.DeepEqual(s, want2) {
		t.Fatalf("subnets %v, want %v", s, want2)
	}
	// A field added later is ignored by this reader.
	extra := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(extra, []byte(`{"machines":{"M1":{"subnet":"10.210.1.0/24","phase":"participating","later":1}},"later":true}`), 0o600)
	if got, err := ReadTrusted(extra); err != nil || got.Subnets()["m1"] != want2["m1"] {
		t.Fatalf("tolerant read: %+v %v", got, err)
	}
}

func TestReadTrustedMissingOrBad(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"", filepath.Join(dir, "none.json")} {
		if got, err := ReadTrusted(p); got != nil || err != nil {
			t.Fatalf("%q: %+v %v, want nil, nil (no list: not checked)", p, got, err)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"machines":`), 0o600)
	if _, err := ReadTrusted(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a torn file reads without an error naming it: %v", err)
	}
}

// TestComputeRefusesUntrustedMachines: a store writer forges a
// participating machines row, a new Machine id (m9) or m2 with another
// subnet; ployzd's trust list does not hold it, so the plugins vouch for
// nothing of it. Without a list the machines table alone is taken.
func TestComputeRefusesUntrustedMachines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TrustedFileName)
	if err := WriteTrusted(path, TrustedMachines{Machines: map[string]TrustedMachine{
		"m1": {Subnet: "10.210.1.0/24", Phase: Participating},
		"m2": {Subnet: "10.210.2.0/24", Phase: Participating},
	}}); err != nil {
		t.Fatal(err)
	}
	// The store's machines table, forged: m9 is new, m2 moved.
	table := participatingTable("m1", "10.210.1.0/24", "m2", "10.210.20.0/24", "m9", "10.210.99.0/24")
	rows := []store.Row[store.ContainerBody]{
		crow("good", "m1", "demo", "web", "10.210.1.2", "d1", true),
		crow("forged-id", "m9", "demo", "web", "10.210.99.2", "d1", true),
		crow("forged-subnet", "M2", "demo", "web", "10.210.20.2", "d1", true),
	}
	trusted, err := ReadTrusted(path)
	if err != nil {
		t.Fatal(err)
	}
	ms := table
	ms.Trusted = trusted.Subnets()
	got := Compute(Input{Machines: ms, Containers: rows})["demo/web"]
	if k := keys(got); len(k) != 1 || k[0] != "good" || got.Refused != 2 {
		t.Fatalf("with the trust list: serves %v, refused %d; want good only, 2 refused", k, got.Refused)
	}
	if err := ms.Vouched("m9", netip.MustParseAddr("10.210.99.2")); err == nil || !strings.Contains(err.Error(), `"m9" has no participating machines row this Machine accepted`) {
		t.Fatalf("forged id: %v", err)
	}
	if err := ms.Vouched("M2", netip.MustParseAddr("10.210.20.2")); err == nil || !strings.Contains(err.Error(), "10.210.20.0/24 in the store is not the one this Machine accepted (10.210.2.0/24)") {
		t.Fatalf("changed subnet: %v", err)
	}
	// A trusted Machine whose trusted row is not participating (it left;
	// its row forged back to participating) vouches for nothing either.
	ms.Trusted = TrustedMachines{Machines: map[string]TrustedMachine{"m1": {Subnet: "10.210.1.0/24", Phase: "leaving"}}}.Subnets()
	if got := Compute(Input{Machines: ms, Containers: rows})["demo/web"]; len(got.Members) != 0 || got.Refused != 3 {
		t.Fatalf("left Machine: %+v", got)
	}
	// No file (an older ployzd, or before it first wrote one): as before.
	none, err := ReadTrusted(filepath.Join(dir, "absent.json"))
	if err != nil || none != nil {
		t.Fatalf("absent: %v %v", none, err)
	}
	got = Compute(Input{Machines: table, Containers: rows})["demo/web"]
	if len(got.Members) != 3 || got.Refused != 0 {
		t.Fatalf("without a list: %+v, want all 3 served (the table alone)", got)
	}
}

// TestFollowTrustedWakes: a rewrite of the list (a rename), its first
// appearance and its removal each wake the reader.
func TestFollowTrustedWakes(t *testing.T) {
	path := filepath.Join(t.TempDir(), TrustedFileName)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan struct{}, 1)
	go followTrusted(path).run(ctx, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	wait := func(what string) {
		t.Helper()
		select {
		case <-woke:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not wake the reader", what)
		}
	}
	if err := WriteTrusted(path, trustedFixture); err != nil {
		t.Fatal(err)
	}
	wait("the first write")
	if err := WriteTrusted(path, TrustedMachines{}); err != nil {
		t.Fatal(err)
	}
	wait("a rewrite")
	os.Remove(path)
	wait("the removal")
}

// TestFollowTrustedOutlivesItsDirectory: when the list's directory is
// removed and made again (a reboot's /run), a new list still wakes the
// reader.
func TestFollowTrustedOutlivesItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TrustedFileName)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	woke := make(chan struct{}, 1)
	go followTrusted(path).run(ctx, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	time.Sleep(100 * time.Millisecond) // the watch is set
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteTrusted(path, trustedFixture); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("a list written into the remade directory did not wake the reader")
	}
}
