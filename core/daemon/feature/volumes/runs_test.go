package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/daemon/feature/leases"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func beginReq(volume, kind, who, nonce string, floor uint64) rpc.BeginVolumeRunRequest {
	return rpc.BeginVolumeRunRequest{Volume: volume, Kind: kind, Floor: floor, StartedAt: time.Now().UnixMilli(),
		Operator: store.HistoryOperator{Name: who}, LeaseNonce: nonce, Run: json.RawMessage(`{"kind":"` + kind + `","steps":[]}`)}
}

// holdLease has who acquire scope's lease for a minute, through the
// lease feature's acquire_lease as an entry grants it.
func holdLease(t *testing.T, st *sdkstore.Client, scope, who, nonce string) {
	t.Helper()
	req := rpc.AcquireLeaseRequest{Scope: scope, Holder: rpc.LeaseHolder{Name: who}, Command: "deploy", Nonce: nonce,
		Expires: time.Now().Add(time.Minute).UnixMilli()}
	if _, err := featuretest.Call(t, leaseHandler(t, st, rpc.CmdAcquireLease), req); err != nil {
		t.Fatal(err)
	}
}

// leaseHandler is Machine m1's lease command cmd over st.
func leaseHandler(t *testing.T, st *sdkstore.Client, cmd string) rpc.Handler {
	f := leases.New(featuretest.StoreHost{St: st, Self: "m1", Dir: t.TempDir()}, hclog.NewNullLogger())
	return featuretest.Handler(t, f.Routes(), cmd)
}

func begin(t *testing.T, f *Feature, req rpc.BeginVolumeRunRequest) rpc.VolumeRunBegun {
	t.Helper()
	out, err := featuretest.Call(t, featuretest.Typed(f.beginVolumeRun), req)
	if err != nil {
		t.Fatal(err)
	}
	return out.(rpc.VolumeRunBegun)
}

func listRuns(t *testing.T, f *Feature, req rpc.ListVolumeRunsRequest) []store.VolumeRunBody {
	t.Helper()
	out, err := featuretest.Call(t, featuretest.Typed(f.listVolumeRuns), req)
	if err != nil {
		t.Fatal(err)
	}
	return out.(rpc.VolumeRunList).Runs
}

// TestVolumeRunsNumberedAcrossOperators: gens grow per volume above the
// floor; a run whose driver still holds the volume's lease refuses the
// next; once that lease is gone the next run marks it lost; a run's end
// is recorded and listed newest first, with who drove it.
func TestVolumeRunsNumberedAcrossOperators(t *testing.T) {
	f, st := newTest(t, "m1")
	ctx := context.Background()
	holdLease(t, st, "volume:db", "ana", "nonce-ana-1")
	a := begin(t, f, beginReq("db", "mirror", "ana", "nonce-ana-1", 0))
	if a.Gen != 1 {
		t.Fatalf("first gen %d, want 1", a.Gen)
	}
	if b := begin(t, f, beginReq("logs", "mirror", "ana", "", 4)); b.Gen != 5 {
		t.Fatalf("another volume above floor 4: gen %d, want 5", b.Gen)
	}
	// ana's run is held by her lease: bo (unleased) is refused naming it.
	_, err := featuretest.Call(t, featuretest.Typed(f.beginVolumeRun), beginReq("db", "sync", "bo", "", 0))
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeConflict || !strings.Contains(e.Message, "gen 1") || !strings.Contains(e.Message, "ana") {
		t.Fatalf("begin while ana's run is held: %v", err)
	}
	// bo naming a lease he does not hold is refused.
	if _, err := featuretest.Call(t, featuretest.Typed(f.beginVolumeRun), beginReq("db", "sync", "bo", "nonce-bo-01", 0)); !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond {
		t.Fatalf("begin under a lease not held: %v", err)
	}
	// ana's lease goes: her open run is answered lost, and bo's run marks it so.
	if _, err := featuretest.Call(t, leaseHandler(t, st, rpc.CmdReleaseLease), rpc.ReleaseLeaseRequest{Scope: "volume:db", Nonce: "nonce-ana-1"}); err != nil {
		t.Fatal(err)
	}
	if runs := listRuns(t, f, rpc.ListVolumeRunsRequest{Volume: "db"}); len(runs) != 1 || runs[0].State != store.VolumeRunLost {
		t.Fatalf("ana's run after her lease went: %+v", runs)
	}
	holdLease(t, st, "volume:db", "bo", "nonce-bo-01")
	b := begin(t, f, beginReq("db", "move", "bo", "nonce-bo-01", 0))
	if b.Gen != 2 || len(b.Lost) != 1 || b.Lost[0] != 1 {
		t.Fatalf("bo's run: %+v, want gen 2 marking gen 1 lost", b)
	}
	row, _, _ := store.VolumeRuns(st).Get(ctx, "db/1")
	if row.Body.State != store.VolumeRunLost || row.Body.Operator.Name != "ana" {
		t.Fatalf("ana's run row: %+v", row.Body)
	}
	// ana's process, still writing steps, does not reopen it; bo ends his.
	put := rpc.PutVolumeRunRequest{Volume: "db", Gen: 1, State: "open", UpdatedAt: time.Now().UnixMilli(), Run: json.RawMessage(`{"steps":[{"name":"x"}]}`)}
	if _, err := featuretest.Call(t, featuretest.Typed(f.putVolumeRun), put); err != nil {
		t.Fatal(err)
	}
	put.Gen, put.State, put.Error = 2, "failed", "send: boom"
	if _, err := featuretest.Call(t, featuretest.Typed(f.putVolumeRun), put); err != nil {
		t.Fatal(err)
	}
	runs := listRuns(t, f, rpc.ListVolumeRunsRequest{Volume: "db"})
	if len(runs) != 2 || runs[0].Gen != 2 || runs[0].State != "failed" || runs[0].Error != "send: boom" || runs[0].Operator.Name != "bo" ||
		runs[1].State != store.VolumeRunLost || !strings.Contains(string(runs[1].Run), `"x"`) {
		t.Fatalf("runs of db: %+v", runs)
	}
	if moves := listRuns(t, f, rpc.ListVolumeRunsRequest{Volume: "db", Kind: "move", Limit: 1}); len(moves) != 1 || moves[0].Gen != 2 {
		t.Fatalf("last move: %+v", moves)
	}
	if all := listRuns(t, f, rpc.ListVolumeRunsRequest{}); len(all) != 3 {
		t.Fatalf("all runs: %d, want 3", len(all))
	}
}

// TestVolumeRunImportOnce: an imported run is written when absent and
// left when there; a put of a run never begun is refused naming gen.
func TestVolumeRunImportOnce(t *testing.T) {
	f, _ := newTest(t, "m1")
	imp := rpc.PutVolumeRunRequest{Volume: "db", Gen: 7, Kind: "move", State: "done", StartedAt: 1764470000000, UpdatedAt: 1764470001000,
		Operator: store.HistoryOperator{Name: "ana"}, Import: true, Run: json.RawMessage(`{"gen":7}`)}
	for i, want := range []bool{false, true} {
		out, err := featuretest.Call(t, featuretest.Typed(f.putVolumeRun), imp)
		if err != nil || out.(rpc.VolumeRunPut).Existing != want {
			t.Fatalf("import %d: %+v, %v; want existing %v", i, out, err, want)
		}
	}
	if b := begin(t, f, beginReq("db", "sync", "bo", "", 0)); b.Gen != 8 {
		t.Fatalf("after an imported gen 7: gen %d, want 8", b.Gen)
	}
	imp.Import, imp.Gen = false, 9
	if _, err := featuretest.Call(t, featuretest.Typed(f.putVolumeRun), imp); !isField(err, "gen") {
		t.Fatalf("put of a run never begun: %v", err)
	}
}

// isField reports whether err is a refusal naming field.
func isField(err error, field string) bool {
	var e *rpc.Error
	return errors.As(err, &e) && (e.Details["field"] == field || strings.Contains(e.Message, field))
}

// TestVolumeRunBadInput: malformed requests are refused naming the
// field, and nothing is written.
func TestVolumeRunBadInput(t *testing.T) {
	f, st := newTest(t, "m1")
	now := time.Now().UnixMilli()
	okRun := json.RawMessage(`{}`)
	cases := []struct {
		field string
		h     rpc.Handler
		req   any
	}{
		{"volume", featuretest.Typed(f.beginVolumeRun), beginReq("Bad/Name", "move", "ana", "", 0)},
		{"kind", featuretest.Typed(f.beginVolumeRun), beginReq("db", "mo ve", "ana", "", 0)},
		{"operator.name", featuretest.Typed(f.beginVolumeRun), beginReq("db", "move", "", "", 0)},
		{"run", featuretest.Typed(f.beginVolumeRun), rpc.BeginVolumeRunRequest{Volume: "db", Kind: "move", StartedAt: now, Operator: store.HistoryOperator{Name: "ana"}, Run: json.RawMessage(`[1]`)}},
		{"gen", featuretest.Typed(f.putVolumeRun), rpc.PutVolumeRunRequest{Volume: "db", Gen: 0, State: "done", UpdatedAt: now, Run: okRun}},
		{"state", featuretest.Typed(f.putVolumeRun), rpc.PutVolumeRunRequest{Volume: "db", Gen: 1, State: "finished", UpdatedAt: now, Run: okRun}},
		{"volume", featuretest.Typed(f.putVolumeRun), rpc.PutVolumeRunRequest{Volume: "../db", Gen: 1, State: "done", UpdatedAt: now, Run: okRun}},
		{"operator.name", featuretest.Typed(f.putVolumeRun), rpc.PutVolumeRunRequest{Volume: "db", Gen: 1, Kind: "move", State: "done", StartedAt: now, UpdatedAt: now, Import: true, Run: okRun}},
		{"limit", featuretest.Typed(f.listVolumeRuns), rpc.ListVolumeRunsRequest{Limit: -1}},
	}
	for _, c := range cases {
		_, err := featuretest.Call(t, c.h, c.req)
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeInvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want invalid naming %s", c.field, err, c.field)
		}
	}
	if rows, _ := store.VolumeRuns(st).List(context.Background()); len(rows) != 0 {
		t.Fatalf("bad requests wrote %d runs", len(rows))
	}
	// A malformed gen on the wire (not a number) is refused too.
	if _, err := featuretest.Typed(f.putVolumeRun)(context.Background(), json.RawMessage(`{"volume":"db","gen":"one","state":"done"}`)); err == nil || !strings.Contains(err.Error(), "gen") {
		t.Fatalf("a string gen: %v, want refused naming gen", err)
	}
}
