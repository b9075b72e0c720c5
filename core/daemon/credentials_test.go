package daemon

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Hashes are sealed only once every participating ingress Machine opens
// them; until then (an older proxy would admit nobody) they stay plain.
func TestCredentialSealerWaitsForEveryIngress(t *testing.T) {
	d, st := sealingDaemon(t)
	put := func(id string, caps ...string) {
		t.Helper()
		if _, err := st.Machines().Put(t.Context(), sdkstore.Row[sdkstore.MachineBody]{Key: id, Owner: id,
			Body: sdkstore.MachineBody{Name: id, Phase: "participating", Capabilities: caps}}); err != nil {
			t.Fatal(err)
		}
	}
	put("m1id", ingress.CapHTTP, ingress.CapSealedAuth)
	put("m2id", ingress.CapHTTP)
	body := func() sdkstore.ContainerBody {
		return sdkstore.ContainerBody{Ingress: []sdkstore.IngressRoute{{Hostname: "a.test", ContainerPort: 80,
			Options: routeopt.Options{BasicAuth: &routeopt.BasicAuth{Users: map[string]string{"alice": "$2y$04$x"}}}}}}
	}
	// A nil sealer: the observe loop writes the rows plain.
	if s := d.credentialSealer(t.Context(), st); s != nil {
		t.Fatal("a sealer while m2id's ingress cannot open it")
	}
	put("m2id", ingress.CapHTTP, ingress.CapSealedAuth)
	s := d.credentialSealer(t.Context(), st)
	if s == nil {
		t.Fatal("no sealer once every ingress opens it")
	}
	b := body()
	if err := ingress.SealCredentials("c1", &b, s); err != nil || !strings.HasPrefix(b.Ingress[0].BasicAuth.Users["alice"], sdkstore.SealedPrefix) {
		t.Fatalf("not sealed once every ingress opens it: %v %v", err, b.Ingress[0].BasicAuth.Users)
	}
	secret, _ := store.LoadClusterSecret(d.cfg.DataDir)
	proxySide, _ := ingress.NewCredentialsSealer(secret)
	if err := ingress.OpenCredentials("c1", &b, proxySide); err != nil || b.Ingress[0].BasicAuth.Users["alice"] != "$2y$04$x" {
		t.Fatalf("the proxy's sealer does not open ployzd's: %v", err)
	}
}
