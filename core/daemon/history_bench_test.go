package daemon

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// BenchmarkOperatorHistory is what `ployz history` and a teammate's
// `ployz rollback` ask the entry, over a Cluster holding 1,000 revisions
// (10 namespaces of 100, compose sealed), 500 deploy records and 1,500
// history entries, on a real store: the newest 50 entries, one kind's
// entries of one namespace, a namespace's latest revision opened, and
// its deploy records. It measures; it gates nothing (run with -bench).
func BenchmarkOperatorHistory(b *testing.B) {
	d, _ := sealingDaemon(b)
	fillOperatorState(b, d)
	for _, bc := range []struct {
		name string
		h    Handler
		req  any
		want int
	}{
		{"history-newest-50", d.listHistory, rpc.ListHistoryRequest{Limit: 50}, 50},
		{"history-kind-namespace", d.listHistory, rpc.ListHistoryRequest{Namespace: "app3-production", Kind: rpc.HistoryScale, Limit: rpc.HistoryMaxLimit}, 50},
		{"latest-revision-opened", d.listRevisions, rpc.ListRevisionsRequest{Namespace: "app3-production", Latest: true, WithCompose: true}, 1},
		{"deploy-records-namespace", d.listDeployRecords, rpc.ListDeployRecordsRequest{Namespace: "app3-production"}, 50},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				out, err := hcall(b, bc.h, bc.req)
				if err != nil {
					b.Fatal(err)
				}
				if n := answered(out); n != bc.want {
					b.Fatalf("%d answered, want %d", n, bc.want)
				}
			}
		})
	}
}

func answered(out any) int {
	switch o := out.(type) {
	case rpc.HistoryList:
		return len(o.Entries)
	case rpc.RevisionList:
		return len(o.Revisions)
	case rpc.DeployRecordList:
		return len(o.Records)
	}
	return -1
}

// fillOperatorState saves 1,000 revisions through save_revision, and
// writes 500 deploy records and 1,500 history entries.
func fillOperatorState(b *testing.B, d *Daemon) {
	compose := []byte("name: app\nservices:\n  web:\n    image: app:1\n    environment: {TOKEN: s3cret}\n")
	op := store.HistoryOperator{Name: "ana@laptop"}
	for i := range 1000 {
		ns := i % 10
		if _, err := hcall(b, d.saveRevision, rpc.SaveRevisionRequest{ID: fmt.Sprintf("r-%04d", i), Project: fmt.Sprintf("app%d", ns),
			Environment: "production", Compose: compose, Operator: op}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 500 {
		ns := fmt.Sprintf("app%d-production", i%10)
		rec, _ := json.Marshal(map[string]any{"deployment_id": fmt.Sprintf("d%04d", i), "namespace": ns, "status": "completed", "revision": i/10 + 1})
		if _, err := hcall(b, d.putDeployRecord, rpc.PutDeployRecordRequest{DeploymentID: fmt.Sprintf("d%04d", i), Namespace: ns,
			Revision: i/10 + 1, StartedAt: int64(1000 + i), UpdatedAt: int64(1000 + i), Record: rec}); err != nil {
			b.Fatal(err)
		}
	}
	kinds := []string{rpc.HistoryDeploy, rpc.HistoryScale, rpc.HistoryRollback}
	for i := range 1500 {
		e := rpc.HistoryEntry{ID: fmt.Sprintf("h-%04d", i), HistoryBody: store.HistoryBody{Kind: kinds[i%3], Namespace: fmt.Sprintf("app%d-production", i%10),
			Revision: i/10 + 1, Operator: op, StartedAt: int64(1000 + i), FinishedAt: int64(1001 + i), Outcome: rpc.OutcomeCompleted}}
		if _, err := hcall(b, d.recordHistory, rpc.RecordHistoryRequest{Entry: e}); err != nil {
			b.Fatal(err)
		}
	}
}
