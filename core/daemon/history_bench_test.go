package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// BenchmarkOperatorHistory is what `ployz history` and a teammate's
// `ployz rollback` ask the entry, over a Cluster holding 1,000 revisions
// (10 namespaces of 100, compose sealed), 500 deploy records and 1,500
// history entries, on a real store: the newest 50 entries, one kind's
// entries of one namespace, a namespace's latest revision opened, and
// its deploy records. It measures; it gates nothing (run with -bench).
func BenchmarkOperatorHistory(b *testing.B) {
	d, _ := sealingDaemon(b)
	fillOperatorState(b, d, 10)
	for _, bc := range []struct {
		name string
		h    Handler
		req  any
		want int
	}{
		{"history-newest-50", featureRoute(b, d, rpc.CmdListHistory), rpc.ListHistoryRequest{Limit: 50}, 50},
		{"history-kind-namespace", featureRoute(b, d, rpc.CmdListHistory), rpc.ListHistoryRequest{Namespace: "app3-production", Kind: rpc.HistoryScale, Limit: rpc.HistoryMaxLimit}, 50},
		{"latest-revision-opened", featureRoute(b, d, rpc.CmdListRevisions), rpc.ListRevisionsRequest{Namespace: "app3-production", Latest: true, WithCompose: true}, 1},
		{"deploy-records-namespace", featureRoute(b, d, rpc.CmdListDeployRecords), rpc.ListDeployRecordsRequest{Namespace: "app3-production"}, 50},
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
// writes 500 deploy records and 1,500 history entries, spread over
// namespaces app0-production … app<n-1>-production.
func fillOperatorState(b *testing.B, d *Daemon, namespaces int) {
	compose := []byte("name: app\nservices:\n  web:\n    image: app:1\n    environment: {TOKEN: s3cret}\n")
	op := store.HistoryOperator{Name: "ana@laptop"}
	for i := range 1000 {
		ns := i % namespaces
		if _, err := hcall(b, featureRoute(b, d, rpc.CmdSaveRevision), rpc.SaveRevisionRequest{ID: fmt.Sprintf("r-%04d", i), Project: fmt.Sprintf("app%d", ns),
			Environment: "production", Compose: compose, Operator: op}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 500 {
		ns := fmt.Sprintf("app%d-production", i%namespaces)
		rec, _ := json.Marshal(map[string]any{"deployment_id": fmt.Sprintf("d%04d", i), "namespace": ns, "status": "completed", "revision": i/10 + 1})
		if _, err := hcall(b, featureRoute(b, d, rpc.CmdPutDeployRecord), rpc.PutDeployRecordRequest{DeploymentID: fmt.Sprintf("d%04d", i), Namespace: ns,
			Revision: i/10 + 1, StartedAt: int64(1000 + i), UpdatedAt: int64(1000 + i), Record: rec}); err != nil {
			b.Fatal(err)
		}
	}
	kinds := []string{rpc.HistoryDeploy, rpc.HistoryScale, rpc.HistoryRollback}
	for i := range 1500 {
		e := rpc.HistoryEntry{ID: fmt.Sprintf("h-%04d", i), HistoryBody: store.HistoryBody{Kind: kinds[i%3], Namespace: fmt.Sprintf("app%d-production", i%namespaces),
			Revision: i/10 + 1, Operator: op, StartedAt: int64(1000 + i), FinishedAt: int64(1001 + i), Outcome: rpc.OutcomeCompleted}}
		if _, err := hcall(b, featureRoute(b, d, rpc.CmdRecordHistory), rpc.RecordHistoryRequest{Entry: e}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHistoryAndPS is `ployz history` and `ployz ps` as the
// operator library runs them: a client Session over a real Machine RPC
// socket whose entry serves the daemon's own handlers on a real store
// holding one namespace's 1,000 revisions, 500 deploy records and 1,500
// history entries. ps observes the Machines (list_machines from the
// store; list_containers answers three web Containers: Docker is not
// what is measured), reads the declared state and the removal marks.
// The declared state is the newest Saved State of this computer's
// operator store (Session.Declared), so that store holds the same 1,000
// revisions. Issue 39's goal is under 300 ms each; it gates nothing.
func BenchmarkHistoryAndPS(b *testing.B) {
	d, st := sealingDaemon(b)
	fillOperatorState(b, d, 1)
	featuretest.PutMachine(b, st, d.record().ID, "self", machine.Participating)
	s := client.New(localRevisions(b, 1000), servedEntry(b, d), "lab")
	ctx := context.Background()
	const ns = "app0-production"
	for _, bc := range []struct {
		name string
		run  func() (int, error)
		want int
	}{
		{"history", func() (int, error) {
			e, err := s.History(ctx, client.HistoryFilter{})
			return len(e), err
		}, rpc.HistoryDefaultLimit},
		{"history-namespace-all", func() (int, error) {
			e, err := s.History(ctx, client.HistoryFilter{Namespace: ns, Limit: rpc.HistoryMaxLimit})
			return len(e), err
		}, 1500},
		{"ps-services", func() (int, error) {
			rows, _, err := s.Services(ctx, ns)
			if err == nil && (len(rows) != 1 || rows[0].Running != 3) {
				return -1, fmt.Errorf("services %+v, want web running 3", rows)
			}
			return len(rows), err
		}, 1},
		{"ps-containers", func() (int, error) {
			cs, _, err := s.Containers(ctx, ns, "")
			return len(cs), err
		}, 3},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				n, err := bc.run()
				if err != nil {
					b.Fatal(err)
				}
				if n != bc.want {
					b.Fatalf("%d answered, want %d", n, bc.want)
				}
			}
		})
	}
}

// BenchmarkDeployOperatorState is what a deploy adds for its lease and
// its replicated records, through the entry's handlers over a real
// Machine RPC socket on a real store holding a namespace's 1,000
// revisions: "fixed" is the namespace's lease acquired, renewed once
// and released, the revision saved, the history entry written when the
// deploy starts and when it ends, and its deploy record written when it
// starts and when it finishes; "record-write" is one more deploy record
// write, which a deploy repeats while its record changes (at most every
// 500 ms). "baseline-pointer-move" runs beside them in the same run:
// one Serving Pointer move naming three Containers, a step a deploy of
// 10 Services takes ten times and BenchmarkDeploy10x3's trace times, so
// the added cost can be set against something measured here without
// the lab. "acquire-two-entries" is an acquire and release through an
// entry whose store has a peer: the grant then waits for concurrent
// writes to settle (defaultLeaseSettle), which the single store skips.
// It measures; it gates nothing.
func BenchmarkDeployOperatorState(b *testing.B) {
	d, st := sealingDaemon(b)
	fillOperatorState(b, d, 1)
	for _, id := range []string{"c1", "c2", "c3"} {
		if _, err := st.Containers().Put(context.Background(), sdkstore.Row[sdkstore.ContainerBody]{Key: id, Owner: d.record().ID,
			Body: sdkstore.ContainerBody{Service: "web", Namespace: "app0-production", ImageID: "sha256:app", Deployment: "d1", State: "running"}}); err != nil {
			b.Fatal(err)
		}
	}
	ent := servedEntry(b, d)
	ctx := context.Background()
	spent := map[string]time.Duration{} // per command, for where the time goes
	call := func(cmd string, req any) {
		start := time.Now()
		if err := ent.Call(ctx, rpc.Target{}, cmd, req, nil); err != nil {
			b.Fatalf("%s: %v", cmd, err)
		}
		spent[cmd] += time.Since(start)
	}
	compose := []byte("name: app\nservices:\n  web:\n    image: app:2\n    environment: {TOKEN: s3cret}\n")
	op := store.HistoryOperator{Name: "ana@laptop"}
	n := 0
	record := func(id string, status string) {
		body, _ := json.Marshal(map[string]any{"deployment_id": id, "namespace": "app0-production", "status": status, "revision": 1001})
		now := time.Now().UnixMilli()
		call(rpc.CmdPutDeployRecord, rpc.PutDeployRecordRequest{DeploymentID: id, Namespace: "app0-production", Revision: 1001,
			StartedAt: now, UpdatedAt: now, Record: body})
	}
	b.Run("fixed", func(b *testing.B) {
		for b.Loop() {
			n++
			id, nonce := fmt.Sprintf("dx%05d", n), fmt.Sprintf("nonce-%05d", n)
			const scope = "namespace:app0-production"
			call(rpc.CmdAcquireLease, acquireReq(scope, "ana", nonce, time.Minute))
			h := rpc.HistoryEntry{ID: "h-" + id, HistoryBody: store.HistoryBody{Kind: rpc.HistoryDeploy, Namespace: "app0-production",
				Operator: op, StartedAt: time.Now().UnixMilli(), Outcome: rpc.OutcomeRunning}}
			call(rpc.CmdRecordHistory, rpc.RecordHistoryRequest{Entry: h})
			call(rpc.CmdSaveRevision, rpc.SaveRevisionRequest{ID: "r-" + id, Project: "app0", Environment: "production", Compose: compose, Operator: op})
			record(id, "running")
			call(rpc.CmdRenewLease, rpc.RenewLeaseRequest{Scope: scope, Nonce: nonce, Expires: time.Now().Add(time.Minute).UnixMilli()})
			record(id, "completed")
			h.FinishedAt, h.Outcome = time.Now().UnixMilli(), rpc.OutcomeCompleted
			call(rpc.CmdRecordHistory, rpc.RecordHistoryRequest{Entry: h})
			call(rpc.CmdReleaseLease, rpc.ReleaseLeaseRequest{Scope: scope, Nonce: nonce})
		}
		for cmd, d := range spent {
			b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), cmd+"-ms/op")
		}
	})
	b.Run("record-write", func(b *testing.B) {
		for b.Loop() {
			record("dx00000", "running")
		}
	})
	b.Run("baseline-pointer-move", func(b *testing.B) {
		cs := []rpc.ServingContainer{{ID: "c1", MachineID: d.record().ID}, {ID: "c2", MachineID: d.record().ID}, {ID: "c3", MachineID: d.record().ID}}
		for b.Loop() {
			call(rpc.CmdMoveServingPointer, rpc.MoveServingPointerRequest{Service: "app0-production/web", Deployment: "d1", Containers: cs})
		}
	})
	b.Run("acquire-two-entries", func(b *testing.B) {
		d1, _ := twoEntries(b)
		d1.leaseFeature().SettleTime = 0 // defaultLeaseSettle, as a Machine waits
		for b.Loop() {
			n++
			nonce := fmt.Sprintf("nonce-%05d", n)
			if _, err := hcall(b, featuretest.Handler(b, d1.leaseFeature().Routes(), rpc.CmdAcquireLease), acquireReq("namespace:settled", "ana", nonce, time.Minute)); err != nil {
				b.Fatal(err)
			}
			if _, err := hcall(b, featuretest.Handler(b, d1.leaseFeature().Routes(), rpc.CmdReleaseLease), rpc.ReleaseLeaseRequest{Scope: "namespace:settled", Nonce: nonce}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// servedEntry serves d's operator-state routes (history, Saved State,
// leases, allocations and removal marks, Serving Pointers, the Machine
// list) as the entry does, over a real Machine RPC socket;
// list_containers answers three running web Containers of
// app0-production on this Machine, so no Docker is asked.
func servedEntry(b testing.TB, d *Daemon) *rpc.Client {
	d.rpc = rpc.NewServer(rpc.Options{Local: d.local, Peers: d.peers})
	d.rpc.Handle(rpc.Route{Command: rpc.CmdListMachines, Capability: rpc.CapListMachines, Handler: featuretest.Typed(d.listMachines)})
	d.featureRoutes()
	var web []rpc.ContainerObservation
	for _, id := range []string{"c1", "c2", "c3"} {
		web = append(web, rpc.ContainerObservation{ID: id, Name: "web-" + id, MachineID: d.record().ID, Namespace: "app0-production",
			Service: "web", Image: "app:1", State: "running", Ready: true})
	}
	d.rpc.Handle(rpc.Route{Command: rpc.CmdListContainers, Capability: rpc.CapListContainers, Handler: func(context.Context, json.RawMessage) (any, error) {
		return rpc.ContainerList{MachineID: d.record().ID, Containers: web, Volumes: []string{}}, nil
	}})
	return featuretest.ServeServer(b, d.rpc)
}

// localRevisions is an operator store holding n Saved States of
// app0/production in context "lab", as the computer that deployed them
// keeps a copy.
func localRevisions(b testing.TB, n int) *operator.Store {
	st, err := operator.Open(filepath.Join(b.TempDir(), "operator.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	compose := []byte("name: app\nservices:\n  web:\n    image: app:1\n    deploy: {replicas: 3}\n")
	for range n {
		if _, err := st.SaveState("lab", "app0", "production", compose); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// sealingDaemon is storeDaemon with a Cluster secret to seal with.
func sealingDaemon(t testing.TB) (*Daemon, *sdkstore.Client) {
	t.Helper()
	d, st := storeDaemon(t, "m1id")
	featuretest.ClusterSecret(t, d.cfg.DataDir)
	return d, st
}
