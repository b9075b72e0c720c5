package client

import (
	"context"
	"encoding/json"
	"maps"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// localDeploy saves a revision and a completed deploy record of it in a
// store only, as a version before the Cluster kept them did.
func localDeploy(t *testing.T, st *operator.Store, replicas int) int {
	t.Helper()
	compose := strings.Replace(shopCompose, "replicas: 2", "replicas: "+string(rune('0'+replicas)), 1)
	saved, err := st.SaveState("lab", "shop", "production", []byte(compose))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body, _ := json.Marshal(deploy.Record{DeploymentID: deploy.NewID(6), Namespace: "shop-production", Project: "shop", Environment: "production",
		Revision: saved.Revision, Status: deploy.RecordCompleted, StartedAt: now, UpdatedAt: now})
	var rec deploy.Record
	_ = json.Unmarshal(body, &rec)
	if err := st.SaveDeploy(operator.DeployRow{Context: "lab", DeploymentID: rec.DeploymentID, Namespace: "shop-production", StartedAt: now, UpdatedAt: now, Body: body}); err != nil {
		t.Fatal(err)
	}
	return saved.Revision
}

// TestImportLocalStateOnce: a teammate deployed through the Cluster
// first; this computer's three older-format revisions and their records
// are imported once (a second import moves nothing), numbered after the
// teammate's revision, the records renumbered to match, so a rollback
// from this computer finds them in the Cluster.
func TestImportLocalStateOnce(t *testing.T) {
	fc, teammate := newFake(t, "m1", "m2")
	ctx := context.Background()
	deployShop(t, teammate) // Cluster revision 1, by the teammate

	st, ent := fc.NewSession()
	for _, n := range []int{1, 3, 2} {
		localDeploy(t, st, n)
	}
	s := New(st, ent, "lab")
	rep, err := s.ImportLocalState(ctx)
	if err != nil || !rep.Done || rep.Revisions != 3 || rep.Records != 3 || rep.Already {
		t.Fatalf("first import: %+v, %v", rep, err)
	}
	if !strings.Contains(rep.String(), "3 Saved State revision(s), 3 deploy record(s)") {
		t.Fatalf("report %q", rep.String())
	}
	again, err := s.ImportLocalState(ctx)
	if err != nil || again.Moved() || !again.Already {
		t.Fatalf("second import: %+v, %v", again, err)
	}
	revs := fc.Revisions("shop-production")
	if len(revs) != 4 || fc.DeployRecordCount() != 4 {
		t.Fatalf("Cluster holds %d revisions, %d records after importing twice; want 4 and 4", len(revs), fc.DeployRecordCount())
	}
	// Each imported record is a deploy in the Cluster's history, once,
	// under the Cluster's revision number.
	imported := map[int]int{}
	for _, e := range fc.History() {
		if strings.HasPrefix(e.ID, "imp-") && e.Kind == "deploy" && e.Namespace == "shop-production" && e.Outcome == "completed" {
			imported[e.Revision]++
		}
	}
	if !maps.Equal(imported, map[int]int{2: 1, 3: 1, 4: 1}) {
		t.Fatalf("imported history entries by revision: %v, want revisions 2, 3 and 4 once each", imported)
	}
	recs, err := s.namespaceRecords(ctx, "shop-production")
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, r := range recs {
		nums = append(nums, r.Revision)
	}
	if len(nums) != 4 || nums[0] != 4 { // the newest record is the last local deploy: revision 3 here, 4 there
		t.Fatalf("record revisions %v", nums)
	}
	latest, err := s.latestState(ctx, Project{Name: "shop", Environment: "production"})
	if err != nil || latest.Revision != 4 || !strings.Contains(string(latest.Compose), "replicas: 2") {
		t.Fatalf("latest %+v, %v", latest, err)
	}
	dp, err := s.PlanRollback(ctx, Project{Name: "shop", Environment: "production"}, 0, true, 0)
	if err != nil || dp.Why != "rollback to revision 3" {
		t.Fatalf("rollback from the importing computer: %v %v", dp, err)
	}
}

// TestImportWithoutContextImportsNothing: a Session with no context
// (--connect) has no marker to keep and moves nothing.
func TestImportWithoutContextImportsNothing(t *testing.T) {
	fc, _ := newFake(t, "m1")
	st, ent := fc.NewSession()
	rep, err := New(st, ent, "").ImportLocalState(context.Background())
	if err != nil || rep.Done || rep.Moved() {
		t.Fatalf("%+v, %v", rep, err)
	}
}

// TestImportMovesAllocationsAndRemovalsOnce: this computer's allocation
// history and removal mark, kept by a release before the Cluster kept
// them, are imported once, even for a context whose Saved State an
// earlier release already imported; a second import moves nothing, and
// an allocation the Cluster already holds is left as it is.
func TestImportMovesAllocationsAndRemovalsOnce(t *testing.T) {
	fc, teammate := newFake(t, "m1")
	ctx := context.Background()
	net16 := netip.MustParsePrefix("10.210.0.0/16")
	if _, err := teammate.allocations().Allocate(ctx, "id-m1", "m1", net16, nil); err != nil {
		t.Fatal(err)
	}
	st, ent := fc.NewSession()
	for _, id := range []string{"id-m1", "id-m2", "id-m3"} {
		if _, err := st.Allocate("lab", id, strings.TrimPrefix(id, "id-"), net16, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SetAllocationState("lab", "id-m3", "removed"); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRemoval("lab", "shop", "production"); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkImportedToCluster("lab", time.Now()); err != nil {
		t.Fatal(err)
	}
	s := New(st, ent, "lab")
	rep, err := s.ImportLocalState(ctx)
	if err != nil || !rep.Done || rep.Already || rep.Allocations != 2 || rep.Removals != 1 || rep.Revisions != 0 {
		t.Fatalf("first import: %+v, %v", rep, err)
	}
	if !strings.Contains(rep.String(), "2 subnet allocation(s), 1 removal mark(s)") {
		t.Fatalf("report %q", rep.String())
	}
	again, err := s.ImportLocalState(ctx)
	if err != nil || again.Moved() || !again.Already {
		t.Fatalf("second import: %+v, %v", again, err)
	}
	got := map[string]string{}
	for _, a := range fc.Allocations() {
		got[a.MachineID] = a.Subnet + " " + a.State + " " + a.Source
	}
	want := map[string]string{"id-m1": "10.210.0.0/24 allocated ", "id-m2": "10.210.1.0/24 allocated import:lab", "id-m3": "10.210.2.0/24 removed import:lab"}
	if !maps.Equal(got, want) {
		t.Fatalf("Cluster history %v, want %v", got, want)
	}
	if marks := fc.RemovalMarks(); len(marks) != 1 || marks["shop-production"].Project != "shop" {
		t.Fatalf("Cluster marks %+v", marks)
	}
}
