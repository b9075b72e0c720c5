package history

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// storeFeature is the feature on Machine self over a fresh store.
func storeFeature(t *testing.T, self string) (*Feature, *sdkstore.Client) {
	t.Helper()
	h, st := featuretest.Store(t, self)
	return New(h), st
}

func historyEntry(id, kind, ns string, at int64) rpc.HistoryEntry {
	return rpc.HistoryEntry{ID: id, HistoryBody: store.HistoryBody{Kind: kind, Namespace: ns, Revision: 1,
		Operator: store.HistoryOperator{Name: "ana@laptop", KeyFingerprint: "SHA256:k"}, StartedAt: at, Outcome: rpc.OutcomeRunning}}
}

// TestHistoryRecordAndList writes entries through record_history into a
// real store and lists them back filtered, newest first; rewriting an id
// replaces its entry (an operation's start, then its end).
func TestHistoryRecordAndList(t *testing.T) {
	d, st := storeFeature(t, "m1id")
	for i, e := range []rpc.HistoryEntry{
		historyEntry("h1", rpc.HistoryDeploy, "app-prod", 100),
		historyEntry("h2", rpc.HistoryScale, "app-prod", 200),
		historyEntry("h3", rpc.HistoryDeploy, "blog-prod", 300),
	} {
		if _, err := featuretest.Call(t, featuretest.Typed(d.recordHistory), rpc.RecordHistoryRequest{Entry: e}); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	done := historyEntry("h1", rpc.HistoryDeploy, "app-prod", 100)
	done.Outcome, done.FinishedAt, done.Detail = rpc.OutcomeFailed, 150, "create web: no space left"
	if _, err := featuretest.Call(t, featuretest.Typed(d.recordHistory), rpc.RecordHistoryRequest{Entry: done}); err != nil {
		t.Fatal(err)
	}
	row, ok, err := store.History(st).Get(t.Context(), "h1")
	if err != nil || !ok || row.Owner != "m1id" || row.Body.Outcome != rpc.OutcomeFailed || row.Body.Operator.Name != "ana@laptop" {
		t.Fatalf("row h1: %+v %v %v", row, ok, err)
	}
	list := func(req rpc.ListHistoryRequest) string {
		t.Helper()
		out, err := featuretest.Call(t, featuretest.Typed(d.listHistory), req)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range out.(rpc.HistoryList).Entries {
			ids = append(ids, fmt.Sprintf("%s:%s:%s", e.ID, e.Outcome, e.RecordedBy))
		}
		return strings.Join(ids, ",")
	}
	if got := list(rpc.ListHistoryRequest{}); got != "h3:running:m1id,h2:running:m1id,h1:failed:m1id" {
		t.Errorf("all: %s", got)
	}
	if got := list(rpc.ListHistoryRequest{Namespace: "app-prod", Kind: rpc.HistoryDeploy}); got != "h1:failed:m1id" {
		t.Errorf("app-prod deploys: %s", got)
	}
	if got := list(rpc.ListHistoryRequest{Limit: 1}); got != "h3:running:m1id" {
		t.Errorf("limit 1: %s", got)
	}
}

// TestHistoryRefusesBadInput: an unknown kind filter and a malformed
// revision are refused naming the field, and nothing is written.
func TestHistoryRefusesBadInput(t *testing.T) {
	d, st := storeFeature(t, "m1id")
	var e *rpc.Error
	_, err := featuretest.Call(t, featuretest.Typed(d.listHistory), map[string]any{"kind": "deploys"})
	if !errors.As(err, &e) || e.Details["field"] != "kind" {
		t.Fatalf("unknown kind: %v", err)
	}
	_, err = featuretest.Call(t, featuretest.Typed(d.recordHistory), map[string]any{"entry": map[string]any{"id": "h1", "kind": "deploy", "revision": "7",
		"operator": map[string]any{"name": "ana"}, "started_at": 1, "outcome": "running"}})
	if !errors.As(err, &e) || e.Details["field"] != "entry.revision" {
		t.Fatalf("malformed revision: %v", err)
	}
	bad := historyEntry("h2", rpc.HistoryDeploy, "app-prod", 1)
	bad.Revision = -1
	if _, err = featuretest.Call(t, featuretest.Typed(d.recordHistory), rpc.RecordHistoryRequest{Entry: bad}); !errors.As(err, &e) || e.Details["field"] != "entry.revision" {
		t.Fatalf("negative revision: %v", err)
	}
	if rows, err := store.History(st).List(t.Context()); err != nil || len(rows) != 0 {
		t.Fatalf("refused entries were written: %v %v", rows, err)
	}
}
