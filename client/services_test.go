package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// TestServicesAndContainers: after a Deploy, Services counts the
// declared web against its running Containers and Containers lists each
// with its Machine, one Service's only when named; another namespace has
// neither.
func TestServicesAndContainers(t *testing.T) {
	_, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	ctx := context.Background()
	rows, snap, err := s.Services(ctx, "shop-production")
	if err != nil || len(snap.Missing) != 0 {
		t.Fatalf("services: %v, unobserved %v", err, snap.Missing)
	}
	if len(rows) != 1 || rows[0].Service != "web" || rows[0].Desired != "2" || rows[0].Running != 2 {
		t.Fatalf("services %+v, want web desired 2 running 2", rows)
	}
	cs, _, err := s.Containers(ctx, "", "web")
	if err != nil || len(cs) != 2 || cs[0].Machine == "" || cs[0].Machine == cs[1].Machine {
		t.Fatalf("containers %+v, %v: want one web on each Machine", cs, err)
	}
	if cs, _, _ := s.Containers(ctx, "shop-production", "db"); len(cs) != 0 {
		t.Fatalf("containers of a Service not deployed: %+v", cs)
	}
	if rows, _, _ := s.Services(ctx, "other-production"); len(rows) != 0 {
		t.Fatalf("services of another namespace: %+v", rows)
	}
}

// TestNamespaceResolution: a named project wins; without one the
// context's only saved project is used; NamespaceOrAll is every
// namespace ("") with all or without a project to find.
func TestNamespaceResolution(t *testing.T) {
	_, s := newFake(t, "m1")
	ctx := context.Background()
	none := filepath.Join(t.TempDir(), "compose.yaml")
	if ns, err := s.Namespace(ctx, "blog", "staging", none); err != nil || ns != "blog-staging" {
		t.Fatalf("named: %q, %v", ns, err)
	}
	if _, err := s.Namespace(ctx, "", deploy.DefaultEnvironment, none); err == nil {
		t.Fatal("no project saved and none named: no error")
	}
	if ns := s.NamespaceOrAll(ctx, "", deploy.DefaultEnvironment, none, false); ns != "" {
		t.Fatalf("no project to find: %q, want every namespace", ns)
	}
	deployShop(t, s)
	if ns, err := s.Namespace(ctx, "", deploy.DefaultEnvironment, none); err != nil || ns != "shop-production" {
		t.Fatalf("the only saved project: %q, %v", ns, err)
	}
	compose := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(compose, []byte("name: blog\nservices:\n  web: {image: app:1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ns := s.NamespaceOrAll(ctx, "", deploy.DefaultEnvironment, compose, false); ns != "blog-production" {
		t.Fatalf("the compose file's name: %q", ns)
	}
	if ns := s.NamespaceOrAll(ctx, "shop", deploy.DefaultEnvironment, none, true); ns != "" {
		t.Fatalf("all: %q, want every namespace", ns)
	}
}

// TestLostRows: ps lists the Containers a Serving Pointer names on a
// Down Machine, state unknown, filtered by namespace and Service; a
// Machine that is only unobserved, or up, adds none.
func TestLostRows(t *testing.T) {
	snap := deploy.Snapshot{Machines: []deploy.MachineState{
		{ID: "id1", Name: "m1", Observed: true},
		{ID: "id2", Name: "m2", Membership: deploy.MembershipDown},
		{ID: "id3", Name: "m3"},
	}, Serving: map[string][]rpc.ServingContainer{
		"app-prod/web":  {{ID: "c1", MachineID: "id1"}, {ID: "c2aaaaaaaaaaaaaaaa", MachineID: "id2", Deployment: "d7", ImageID: "sha256:1"}, {ID: "c3", MachineID: "id3"}},
		"app-prod/api":  {{ID: "c4", MachineID: "id2"}},
		"other-prod/db": {{ID: "c5", MachineID: "id2"}},
	}}
	got := LostRows(snap, "app-prod", "")
	if len(got) != 2 || got[0].Service != "api" || got[1].Service != "web" {
		t.Fatalf("app-prod: %+v, want api's c4 then web's c2", got)
	}
	web := got[1]
	if !web.Down || web.Machine != "m2" || web.ID != "c2aaaaaaaaaaaaaaaa" || web.Name != "c2aaaaaaaaaa" || web.State != StateUnknown ||
		web.Ready || web.Deployment != "d7" || web.ImageID != "sha256:1" || web.Namespace != "app-prod" {
		t.Errorf("web's lost row: %+v", web)
	}
	if got := LostRows(snap, "", "db"); len(got) != 1 || got[0].ID != "c5" {
		t.Errorf("every namespace, db: %+v", got)
	}
	if got := LostRows(deploy.Snapshot{Machines: snap.Machines}, "", ""); len(got) != 0 {
		t.Errorf("no Serving Pointer read: %+v", got)
	}
}
