package proxy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/bcrypt"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// The proxy opens a sealed hash with the Cluster secret its spec names;
// without it the route's user does not get in (fails closed).
func TestCredentialsOpenSealedHashes(t *testing.T) {
	secret, _ := store.NewClusterSecret()
	file := filepath.Join(t.TempDir(), "cluster-secret")
	if err := os.WriteFile(file, []byte(secret.Hex()), 0o600); err != nil {
		t.Fatal(err)
	}
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	b := store.ContainerBody{Ingress: []store.IngressRoute{{Hostname: "a.test", ContainerPort: 80,
		Options: routeopt.Options{BasicAuth: &routeopt.BasicAuth{Users: map[string]string{"alice": string(hash)}}}}}}
	s, _ := ingress.NewCredentialsSealer(secret)
	if err := ingress.SealCredentials("c1", &b, s); err != nil {
		t.Fatal(err)
	}
	rows := []store.Row[store.ContainerBody]{{Key: "c1", Body: b}}
	creds, err := loadCredentials(ingress.Spec{ClusterSecretFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if got := creds.open(rows, hclog.NewNullLogger()); !got[0].Body.Ingress[0].BasicAuth.Allows("alice", "pw") {
		t.Fatal("the sealed hash did not open")
	}
	if rows[0].Body.Ingress[0].BasicAuth.Users["alice"] == string(hash) {
		t.Fatal("open changed the rows it was given")
	}
	none, _ := loadCredentials(ingress.Spec{})
	if got := none.open(rows, hclog.NewNullLogger()); got[0].Body.Ingress[0].BasicAuth.Allows("alice", "pw") {
		t.Fatal("a sealed hash admitted without the Cluster secret")
	}
}
