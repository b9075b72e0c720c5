package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ployz/ployz/core/store/storetest"
)

// TestTokenFileClientReadsAndWrites: a plugin's rows go in through Writer
// and come back through Reader, with the rows others wrote; a token file
// rewritten with a new token (the store restarted with one) is read again
// after the first failure, without a new client.
func TestTokenFileClientReadsAndWrites(t *testing.T) {
	ctx := context.Background()
	n := storetest.Start(t, storetest.WithToken("first"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf := NewTokenFileClient(n.API(), tokenFile)
	var (
		r Reader = tf
		w Writer = tf
	)
	if err := w.PutCertificate(ctx, Row[CertificateBody]{Key: "shop.example.com", Owner: "m1", Body: CertificateBody{Issuer: "m1", NotAfter: 9}}); err != nil {
		t.Fatal(err)
	}
	if err := w.PutServingAck(ctx, Row[ServingAckBody]{Key: "m1", Owner: "m1", Body: ServingAckBody{Pointers: map[string]string{"demo/web": "p1"}}}); err != nil {
		t.Fatal(err)
	}
	c := New(n.API(), WithToken("first"))
	if _, err := c.Machines().Put(ctx, Row[MachineBody]{Key: "m1", Owner: "m1", Body: MachineBody{Phase: "participating"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Containers().Put(ctx, Row[ContainerBody]{Key: "c1", Owner: "m1", Body: ContainerBody{Service: "web", Ready: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Serving().Put(ctx, Row[ServingBody]{Key: "demo/web", Owner: "m1", Body: ServingBody{ID: "p1"}}); err != nil {
		t.Fatal(err)
	}
	certs, err := r.Certificates(ctx)
	if err != nil || len(certs) != 1 || certs[0].Body.NotAfter != 9 {
		t.Fatalf("certificates %+v %v", certs, err)
	}
	acks, err := c.ServingAcks().List(ctx)
	if err != nil || len(acks) != 1 || acks[0].Body.Pointers["demo/web"] != "p1" {
		t.Fatalf("serving_acks %+v %v", acks, err)
	}
	ms, err := r.Machines(ctx)
	cs, err2 := r.Containers(ctx)
	ps, err3 := r.ServingPointers(ctx)
	if err != nil || err2 != nil || err3 != nil || len(ms) != 1 || len(cs) != 1 || len(ps) != 1 || ps[0].Body.ID != "p1" {
		t.Fatalf("machines %+v %v, containers %+v %v, serving %+v %v", ms, err, cs, err2, ps, err3)
	}
	if _, err := r.Membership(ctx); err != nil {
		t.Fatalf("membership: %v", err)
	}

	n.Stop()
	storetest.Start(t, storetest.Addr(n.API()), storetest.WithToken("second"))
	if err := os.WriteFile(tokenFile, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Machines(ctx); err == nil {
		t.Fatal("the old token was accepted")
	}
	if rows, err := tf.Machines(ctx); err != nil || len(rows) != 0 {
		t.Fatalf("after the token file changed: %+v %v", rows, err)
	}
}
