package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ployz/ployz/sdk/store"
)

// TestNodeKeepsRowsAcrossRestart: a row written before Stop is read after
// Restart at the same address; while stopped the API does not answer, and
// without the token it refuses.
func TestNodeKeepsRowsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	n := Start(t)
	c := store.New(n.API(), store.WithToken(n.Token()))
	if _, err := c.Machines().Put(ctx, store.Row[store.MachineBody]{Key: "m1", Owner: "m1", Body: store.MachineBody{Name: "one"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.New(n.API()).Machines().List(ctx); err == nil {
		t.Fatal("a client without the token was answered")
	}
	n.Stop()
	if _, err := c.Machines().List(ctx); err == nil {
		t.Fatal("a stopped node answered")
	}
	n.Restart()
	rows, err := c.Machines().List(ctx)
	if err != nil || len(rows) != 1 || rows[0].Body.Name != "one" {
		t.Fatalf("after restart: %+v %v", rows, err)
	}
}

// TestNodeOnSocket: with Socket the API is the socket path, answered
// without a token; NoAuth answers TCP without one.
func TestNodeOnSocket(t *testing.T) {
	ctx := context.Background()
	sock := filepath.Join(t.TempDir(), "api", "api.sock")
	for _, n := range []*Node{Start(t, Socket(sock)), Start(t, NoAuth())} {
		if _, err := store.New(n.API()).Machines().List(ctx); err != nil || n.Token() != "" {
			t.Fatalf("%s: %v (token %q)", n.API(), err, n.Token())
		}
	}
}
