package savedstate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// storeFeature is the feature on Machine self over a fresh store.
func storeFeature(t testing.TB, self string) (*Feature, *sdkstore.Client) {
	t.Helper()
	h, st := featuretest.Store(t, self)
	return New(h), st
}

// sealingFeature is storeFeature with a Cluster secret to seal with.
func sealingFeature(t testing.TB) (*Feature, *sdkstore.Client) {
	t.Helper()
	d, st := storeFeature(t, "m1id")
	featuretest.ClusterSecret(t, d.host.DataDir())
	return d, st
}

func saveRev(t *testing.T, d *Feature, req rpc.SaveRevisionRequest) rpc.RevisionSaved {
	t.Helper()
	if req.Operator.Name == "" {
		req.Operator.Name = "ana"
	}
	out, err := featuretest.Call(t, featuretest.Typed(d.saveRevision), req)
	if err != nil {
		t.Fatal(err)
	}
	return out.(rpc.RevisionSaved)
}

// TestRevisionsSealedAndNumbered: revisions are numbered per namespace
// as they are saved, the compose sealed in the row (the environment
// value never in plain text) and opened when listed; saving an id again
// changes nothing; an imported revision numbers after the others, so no
// number answered before moves.
func TestRevisionsSealedAndNumbered(t *testing.T) {
	d, st := sealingFeature(t)
	compose := []byte("name: shop\nservices:\n  web:\n    image: app:1\n    environment: {TOKEN: s3cret}\n")
	if got := saveRev(t, d, rpc.SaveRevisionRequest{ID: "r-a", Project: "shop", Environment: "production", Compose: compose}); got.Revision != 1 {
		t.Fatalf("first revision %+v", got)
	}
	if got := saveRev(t, d, rpc.SaveRevisionRequest{ID: "r-other", Project: "blog", Environment: "production", Compose: compose}); got.Revision != 1 {
		t.Fatalf("another namespace's first revision %+v", got)
	}
	if got := saveRev(t, d, rpc.SaveRevisionRequest{ID: "r-b", Project: "shop", Environment: "production"}); got.Revision != 2 {
		t.Fatalf("removal revision %+v", got)
	}
	if got := saveRev(t, d, rpc.SaveRevisionRequest{ID: "r-a", Project: "shop", Environment: "production", Compose: []byte("x")}); got.Revision != 1 || !got.Existing {
		t.Fatalf("saving r-a again %+v", got)
	}
	row, _, err := store.Revisions(st).Get(t.Context(), "r-a")
	if err != nil || !strings.HasPrefix(row.Body.Compose, store.SealedPrefix) || strings.Contains(row.Raw, "s3cret") || row.Body.Operator.Name != "ana" {
		t.Fatalf("row r-a %+v: want the compose sealed, %v", row, err)
	}
	saveRev(t, d, rpc.SaveRevisionRequest{ID: "r-imp", Project: "shop", Environment: "production", Compose: compose, Source: "import:home", SourceRevision: 1})

	list := func(req rpc.ListRevisionsRequest) []rpc.Revision {
		t.Helper()
		out, err := featuretest.Call(t, featuretest.Typed(d.listRevisions), req)
		if err != nil {
			t.Fatal(err)
		}
		return out.(rpc.RevisionList).Revisions
	}
	all := list(rpc.ListRevisionsRequest{Namespace: "shop-production"})
	var order []string
	for _, r := range all {
		order = append(order, r.ID)
		if r.Compose != nil {
			t.Errorf("%s: compose answered unasked", r.ID)
		}
	}
	if strings.Join(order, ",") != "r-a,r-b,r-imp" || all[1].Revision != 2 || !all[1].Removal || all[2].Revision != 3 {
		t.Fatalf("revisions %v (%+v)", order, all)
	}
	one := list(rpc.ListRevisionsRequest{Namespace: "shop-production", Revision: 1, WithCompose: true})
	if len(one) != 1 || one[0].ID != "r-a" || string(one[0].Compose) != string(compose) {
		t.Fatalf("revision 1: %+v", one)
	}
	if latest := list(rpc.ListRevisionsRequest{Namespace: "shop-production", Latest: true}); len(latest) != 1 || latest[0].ID != "r-imp" {
		t.Fatalf("latest: %+v", latest)
	}
	every := list(rpc.ListRevisionsRequest{AllNamespaces: true, Latest: true, WithCompose: true})
	if len(every) != 2 || every[0].ID != "r-other" || every[0].Revision != 1 || string(every[0].Compose) != string(compose) ||
		every[1].ID != "r-imp" || every[1].Revision != 3 {
		t.Fatalf("latest of every namespace: %+v, want blog's r-other (1) and shop's r-imp (3), opened", every)
	}
}

// TestRevisionsRefuseBadInput: a malformed revision number or project is
// refused naming the field; without a Cluster secret nothing is saved
// in plain text.
func TestRevisionsRefuseBadInput(t *testing.T) {
	d, st := storeFeature(t, "m1id")
	var e *rpc.Error
	if _, err := featuretest.Call(t, featuretest.Typed(d.listRevisions), map[string]any{"namespace": "shop-production", "revision": "two"}); !errors.As(err, &e) || e.Details["field"] != "revision" {
		t.Fatalf("malformed revision: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(d.listRevisions), rpc.ListRevisionsRequest{Namespace: "shop-production", Revision: -1}); !errors.As(err, &e) || e.Details["field"] != "revision" {
		t.Fatalf("negative revision: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(d.listRevisions), rpc.ListRevisionsRequest{AllNamespaces: true, Namespace: "shop-production", Latest: true}); !errors.As(err, &e) || e.Details["field"] != "namespace" {
		t.Fatalf("every namespace and one: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(d.listRevisions), rpc.ListRevisionsRequest{AllNamespaces: true}); !errors.As(err, &e) || e.Details["field"] != "all_namespaces" {
		t.Fatalf("every namespace's every revision: %v", err)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(d.saveRevision), rpc.SaveRevisionRequest{ID: "r1", Project: "a/b", Environment: "p", Operator: store.HistoryOperator{Name: "ana"}}); !errors.As(err, &e) || e.Details["field"] != "project" {
		t.Fatalf("bad project: %v", err)
	}
	_, err := featuretest.Call(t, featuretest.Typed(d.saveRevision), rpc.SaveRevisionRequest{ID: "r1", Project: "shop", Environment: "p", Compose: []byte("x"), Operator: store.HistoryOperator{Name: "ana"}})
	if !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond {
		t.Fatalf("no secret: %v", err)
	}
	if rows, _ := store.Revisions(st).List(t.Context()); len(rows) != 0 {
		t.Fatalf("saved without a secret: %+v", rows)
	}
}

// TestDeployRecordsRoundTrip: records are rewritten by deployment id and
// listed newest first, by namespace.
func TestDeployRecordsRoundTrip(t *testing.T) {
	d, _ := storeFeature(t, "m1id")
	put := func(id, ns string, started int64, status string) {
		t.Helper()
		rec, _ := json.Marshal(map[string]string{"deployment_id": id, "status": status})
		if _, err := featuretest.Call(t, featuretest.Typed(d.putDeployRecord), rpc.PutDeployRecordRequest{DeploymentID: id, Namespace: ns, Revision: 1, StartedAt: started, UpdatedAt: started, Record: rec}); err != nil {
			t.Fatal(err)
		}
	}
	put("d1", "shop-production", 100, "running")
	put("d2", "blog-production", 200, "completed")
	put("d3", "shop-production", 300, "completed")
	put("d1", "shop-production", 100, "failed")
	out, err := featuretest.Call(t, featuretest.Typed(d.listDeployRecords), rpc.ListDeployRecordsRequest{Namespace: "shop-production"})
	if err != nil {
		t.Fatal(err)
	}
	recs := out.(rpc.DeployRecordList).Records
	if len(recs) != 2 || recs[0].DeploymentID != "d3" || recs[1].DeploymentID != "d1" || !strings.Contains(string(recs[1].Record), `"failed"`) {
		t.Fatalf("records %+v", recs)
	}
	if out, _ := featuretest.Call(t, featuretest.Typed(d.listDeployRecords), rpc.ListDeployRecordsRequest{Limit: 1}); len(out.(rpc.DeployRecordList).Records) != 1 {
		t.Fatalf("limit 1: %+v", out)
	}
	var e *rpc.Error
	if _, err := featuretest.Call(t, featuretest.Typed(d.putDeployRecord), rpc.PutDeployRecordRequest{DeploymentID: "d4", Namespace: "n", StartedAt: 1, Record: []byte(`[1]`)}); !errors.As(err, &e) || e.Details["field"] != "record" {
		t.Fatalf("record not an object: %v", err)
	}
}

// TestRevisionsConcurrentSaves: operators saving at once through one
// entry each get a distinct number, and every revision is kept.
func TestRevisionsConcurrentSaves(t *testing.T) {
	d, _ := sealingFeature(t)
	const n = 8
	got := make(chan int, n)
	for i := range n {
		go func() {
			raw, _ := json.Marshal(rpc.SaveRevisionRequest{ID: "r-" + string(rune('a'+i)), Project: "shop", Environment: "production",
				Compose: []byte("name: shop\n"), Operator: store.HistoryOperator{Name: "ana"}})
			out, err := featuretest.Typed(d.saveRevision)(t.Context(), raw)
			if err != nil {
				t.Error(err)
				got <- 0
				return
			}
			got <- out.(rpc.RevisionSaved).Revision
		}()
	}
	seen := map[int]bool{}
	for range n {
		seen[<-got] = true
	}
	for i := 1; i <= n; i++ {
		if !seen[i] {
			t.Fatalf("numbers %v: want 1 to %d, each once", seen, n)
		}
	}
}
