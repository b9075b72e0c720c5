package ingress

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

func credSealer(t *testing.T, hexByte string) *store.Sealer {
	t.Helper()
	secret, err := store.ParseClusterSecret(strings.Repeat(hexByte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCredentialsSealer(secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func authBody(hash string) store.ContainerBody {
	return store.ContainerBody{Ingress: []store.IngressRoute{{Hostname: "admin.example.test", ContainerPort: 8080,
		Options: routeopt.Options{BasicAuth: &routeopt.BasicAuth{Realm: "staff", Users: map[string]string{"alice": hash}}}}}}
}

// Sealed hashes: stable, in copies, opened only by the same Cluster for
// the same Container, route and user; one that does not open stays
// sealed and no password matches it.
func TestCredentialsSealAndOpen(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	plain := authBody(string(hash))
	s := credSealer(t, "10")
	b := plain
	if err := SealCredentials("c1", &b, s); err != nil {
		t.Fatal(err)
	}
	sealed := b.Ingress[0].BasicAuth.Users["alice"]
	if !strings.HasPrefix(sealed, store.SealedPrefix) || plain.Ingress[0].BasicAuth.Users["alice"] != string(hash) {
		t.Fatalf("sealed %q; the spec's map changed: %v", sealed, plain.Ingress[0].BasicAuth.Users)
	}
	again := plain
	_ = SealCredentials("c1", &again, s)
	if again.Ingress[0].BasicAuth.Users["alice"] != sealed {
		t.Fatal("sealing the same hash twice gave two texts: every rescan would rewrite the row")
	}
	opened := b
	if err := OpenCredentials("c1", &opened, s); err != nil || !opened.Ingress[0].BasicAuth.Allows("alice", "pw") {
		t.Fatalf("open: %v", err)
	}
	for name, tc := range map[string]struct {
		container string
		s         *store.Sealer
	}{"another Container": {"c2", s}, "another Cluster": {"c1", credSealer(t, "20")}, "no secret": {"c1", nil}} {
		o := b
		if err := OpenCredentials(tc.container, &o, tc.s); err == nil {
			t.Errorf("%s: opened", name)
		}
		if o.Ingress[0].BasicAuth.Check() == nil || o.Ingress[0].BasicAuth.Allows("alice", "pw") {
			t.Errorf("%s: a hash that did not open still admits", name)
		}
	}
}

// The containers row with a sealed hash is a replicated format: the
// fixture (with a field from a newer version) reads, opens with the
// pinned secret, and sealing its plain hash gives the same text.
func TestCredentialsRowFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/container-row-sealed-auth.json")
	if err != nil {
		t.Fatal(err)
	}
	var b store.ContainerBody
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	const hash = "$2y$04$abcdefghijklmnopqrstuu5G.mIq6n3Yqm0kT1e2WJJw7cz7LqGhi"
	s := credSealer(t, "10")
	fixture := b.Ingress[0].BasicAuth.Users["alice"]
	opened := b
	if err := OpenCredentials("c1", &opened, s); err != nil || opened.Ingress[0].BasicAuth.Users["alice"] != hash {
		t.Fatalf("open the fixture: %q %v", opened.Ingress[0].BasicAuth.Users["alice"], err)
	}
	resealed := authBody(hash)
	if err := SealCredentials("c1", &resealed, s); err != nil {
		t.Fatal(err)
	}
	if got := resealed.Ingress[0].BasicAuth.Users["alice"]; got != fixture {
		t.Fatalf("sealed form changed:\n got %s\nwant %s", got, fixture)
	}
}

func TestSealingAllowed(t *testing.T) {
	row := func(caps ...string) store.Row[store.MachineBody] {
		return store.Row[store.MachineBody]{Key: "m", Body: store.MachineBody{Phase: "participating", Capabilities: caps}}
	}
	for _, tc := range []struct {
		rows []store.Row[store.MachineBody]
		want bool
	}{
		{[]store.Row[store.MachineBody]{row(CapHTTP, CapSealedAuth), row("ployz.container.host.v1")}, true},
		{[]store.Row[store.MachineBody]{row(CapHTTP, CapSealedAuth), row(CapHTTP)}, false},
		{[]store.Row[store.MachineBody]{row()}, false},
	} {
		if got, _ := SealingAllowed(tc.rows, CapSealedAuth); got != tc.want {
			t.Errorf("SealingAllowed(%v) = %v", tc.rows, got)
		}
	}
}
