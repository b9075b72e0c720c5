package rpc

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/store"
)

// TestHistoryPayloadFixtures pins record_history's and list_history's
// JSON: the entry's body is the history row's body, flattened.
func TestHistoryPayloadFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/history.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Record RecordHistoryRequest `json:"record_history"`
		List   ListHistoryRequest   `json:"list_history"`
		Answer HistoryList          `json:"history_list"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	e := doc.Record.Entry
	if e.ID != "h-1a2b3c" || e.Kind != HistoryScale || e.Revision != 4 || e.Operator != (store.HistoryOperator{Name: "ana@laptop", KeyFingerprint: "SHA256:abc"}) ||
		e.StartedAt != 1764470000000 || e.FinishedAt != 1764470003000 || e.Outcome != OutcomeCompleted || e.Detail != "scale web to 3" {
		t.Fatalf("record: %+v", e)
	}
	if err := doc.Record.Validate(); err != nil {
		t.Fatal(err)
	}
	if doc.List != (ListHistoryRequest{Namespace: "hello-prod", Kind: HistoryScale, Limit: 20}) {
		t.Fatalf("list: %+v", doc.List)
	}
	if len(doc.Answer.Entries) != 1 || doc.Answer.Entries[0].RecordedBy != "m1id" {
		t.Fatalf("answer: %+v", doc.Answer)
	}
	reencodes(t, b, map[string]any{"record_history": doc.Record, "list_history": doc.List, "history_list": doc.Answer})
}

func TestHistoryRequestsRefuseNamingTheField(t *testing.T) {
	good := HistoryEntry{ID: "h1", HistoryBody: store.HistoryBody{Kind: HistoryDeploy, Operator: store.HistoryOperator{Name: "ana"},
		StartedAt: 10, Outcome: OutcomeRunning}}
	if err := (RecordHistoryRequest{Entry: good}).Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(e *HistoryEntry){
		"entry.id":            func(e *HistoryEntry) { e.ID = "a/b" },
		"entry.kind":          func(e *HistoryEntry) { e.Kind = "" },
		"entry.revision":      func(e *HistoryEntry) { e.Revision = -2 },
		"entry.operator.name": func(e *HistoryEntry) { e.Operator.Name = "" },
		"entry.started_at":    func(e *HistoryEntry) { e.StartedAt = 0 },
		"entry.finished_at":   func(e *HistoryEntry) { e.FinishedAt = 5 },
		"entry.outcome":       func(e *HistoryEntry) { e.Outcome = "fine" },
		"entry.detail":        func(e *HistoryEntry) { e.Detail = strings.Repeat("x", 600) },
	}
	for field, edit := range bad {
		e := good
		edit(&e)
		err := RecordHistoryRequest{Entry: e}.Validate()
		if err == nil || !strings.HasPrefix(err.(*Error).Message, field+": ") {
			t.Errorf("%s: got %v", field, err)
		}
	}
	for field, req := range map[string]ListHistoryRequest{"kind": {Kind: "deploys"}, "limit": {Limit: -1}} {
		err := req.Validate()
		if err == nil || err.(*Error).Details["field"] != field {
			t.Errorf("%+v: got %v, want a refusal naming %s", req, err, field)
		}
	}
	// A malformed revision is refused by the decoder, naming it.
	var req RecordHistoryRequest
	err := Decode(CmdRecordHistory, []byte(`{"entry":{"id":"h1","revision":"seven"}}`), &req)
	if err == nil || !strings.Contains(err.Error(), "entry.revision") {
		t.Fatalf("malformed revision: %v", err)
	}
}

func TestListHistorySelect(t *testing.T) {
	mk := func(id, kind, ns string, at int64) HistoryEntry {
		return HistoryEntry{ID: id, HistoryBody: store.HistoryBody{Kind: kind, Namespace: ns, StartedAt: at}}
	}
	all := []HistoryEntry{mk("a", "deploy", "n1", 1), mk("b", "scale", "n1", 3), mk("c", "deploy", "n2", 2), mk("d", "deploy", "n1", 3)}
	ids := func(es []HistoryEntry) string {
		var s []string
		for _, e := range es {
			s = append(s, e.ID)
		}
		return strings.Join(s, ",")
	}
	cases := map[string]ListHistoryRequest{
		"d,b,c,a": {},
		"d,b,a":   {Namespace: "n1"},
		"d,c,a":   {Kind: "deploy"},
		"d,b":     {Limit: 2},
		"d,a":     {Namespace: "n1", Kind: "deploy"},
	}
	for want, req := range cases {
		if got := ids(req.Select(all)); got != want {
			t.Errorf("%+v: %s, want %s", req, got, want)
		}
	}
}
