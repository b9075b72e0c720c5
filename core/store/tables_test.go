package store

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/store/storetest"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// TestCoreTables: core's tables are typed tables on the SDK's client: a
// cluster row an older writer left without protocol_major reads with its
// default, and a volumes row round-trips; HistoryNewest and ListNamespace
// filter and order in the store.
func TestCoreTables(t *testing.T) {
	ctx := context.Background()
	n := storetest.Start(t)
	c := sdkstore.New(n.API(), sdkstore.WithToken(n.Token()))
	if _, err := c.Exec(ctx, sdkstore.Stmt(`INSERT INTO cluster (id, owner, body) VALUES ('c', 'm1', '{"name":"prod"}')`)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := Cluster(c).Get(ctx, "c")
	if err != nil || !ok || got.Body.Name != "prod" || got.Body.ProtocolMajor != 1 {
		t.Fatalf("cluster row %+v ok=%v err=%v (missing field must take its default)", got, ok, err)
	}
	if _, err := Volumes(c).Put(ctx, sdkstore.Row[VolumeBody]{Key: "m1/data", Owner: "m1", Body: VolumeBody{Name: "data", Driver: "zfs"}}); err != nil {
		t.Fatal(err)
	}
	if vs, err := Volumes(c).ListByOwner(ctx, "m1"); err != nil || len(vs) != 1 || vs[0].Body.Driver != "zfs" {
		t.Fatalf("volumes %+v %v", vs, err)
	}
	for i, h := range []HistoryBody{{Kind: "deploy", Namespace: "a", StartedAt: 1}, {Kind: "deploy", Namespace: "a", StartedAt: 3},
		{Kind: "remove", Namespace: "a", StartedAt: 2}, {Kind: "deploy", Namespace: "b", StartedAt: 4}} {
		if _, err := History(c).Put(ctx, sdkstore.Row[HistoryBody]{Key: string(rune('w' + i)), Owner: "m1", Body: h}); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := HistoryNewest(ctx, c, "a", "deploy", 5)
	if err != nil || len(hs) != 2 || hs[0].Body.StartedAt != 3 || hs[1].Body.StartedAt != 1 {
		t.Fatalf("newest deploys of a: %+v %v", hs, err)
	}
	if rs, err := ListNamespace(ctx, History(c), "b"); err != nil || len(rs) != 1 || rs[0].Key != "z" {
		t.Fatalf("namespace b: %+v %v", rs, err)
	}
}
