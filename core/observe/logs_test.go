package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// fakeEntry answers a log_history fan-out; any other call is an error
// (History makes none: the Docker-direct fallback is gone).
type fakeEntry struct {
	fr    rpc.FanoutResult
	calls []string
}

func (f *fakeEntry) Fanout(_ context.Context, _ rpc.Target, command string, _ any) (rpc.FanoutResult, error) {
	f.calls = append(f.calls, command)
	return f.fr, nil
}

func (f *fakeEntry) Call(_ context.Context, t rpc.Target, command string, _, _ any) error {
	f.calls = append(f.calls, command+" "+t.One)
	return fmt.Errorf("unexpected %s", command)
}

func history(t *testing.T, lines []rpc.LogRecord, gaps ...rpc.LogGap) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(rpc.LogHistory{Lines: lines, Gaps: gaps})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	oldDaemon  = rpc.Errorf(rpc.CodeUnsupported, `command "log_history" is not served by this Machine`).With("command", rpc.CmdLogHistory)
	pluginDown = rpc.Errorf(rpc.CodeUnavailable, "capability ployz.logs.history.v1 is not served").With("capability", "ployz.logs.history.v1")
)

// TestMergeHistoryNamesEveryMachine: lines of all Machines merge by time,
// a refusing or omitted Machine is listed, never dropped silently.
func TestMergeHistoryNamesEveryMachine(t *testing.T) {
	fr := rpc.FanoutResult{
		Results: []rpc.TargetResult{
			{MachineName: "m1", Payload: history(t, []rpc.LogRecord{{Time: 1, Text: "a1"}, {Time: 3, Text: "a3"}})},
			{MachineName: "m2", Payload: history(t, []rpc.LogRecord{{Time: 2, Text: "b2"}}, rpc.LogGap{From: 0, To: 1, Reason: "deleted by retention (size cap)"})},
			{MachineName: "m3", Error: pluginDown}},
		Omitted: []rpc.Omission{{MachineName: "m4", Reason: "unreachable"}},
	}
	l := MergeHistory(fr, rpc.LogHistoryRequest{Limit: 2, Newest: true})
	if len(l.Lines) != 2 || l.Lines[0].Text != "b2" || l.Lines[0].Machine != "m2" || l.Lines[1].Text != "a3" {
		t.Fatalf("lines %+v", l.Lines)
	}
	if len(l.Failed) != 2 || l.Failed[0].Machine != "m3" || !strings.Contains(l.Failed[0].Error, "logstore plugin") || l.Failed[1].Machine != "m4" {
		t.Fatalf("failed %+v", l.Failed)
	}
	if len(l.Notes) != 1 || !strings.Contains(l.Notes[0], "size cap") {
		t.Fatalf("notes %v", l.Notes)
	}
}

// TestHistoryNamesMachinesWithoutALogStore: m1 answers from its Log
// Store; m2's ployzd predates log_history and m3's plugin is down, so
// each is named with the way out (no Docker-direct fallback is asked);
// an omitted m4 is named.
func TestHistoryNamesMachinesWithoutALogStore(t *testing.T) {
	f := &fakeEntry{fr: rpc.FanoutResult{
		Results: []rpc.TargetResult{
			{MachineID: "id1", MachineName: "m1", Payload: history(t, []rpc.LogRecord{{Time: 100, Text: "m1 hello"}, {Time: 300, Text: "m1 hello again"}})},
			{MachineID: "id2", MachineName: "m2", Error: oldDaemon},
			{MachineID: "id3", MachineName: "m3", Error: pluginDown}},
		Omitted: []rpc.Omission{{MachineID: "id4", MachineName: "m4", Reason: "unreachable"}},
	}}
	l, err := History(context.Background(), f, rpc.Target{All: true}, rpc.LogHistoryRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Lines) != 2 || l.Lines[0].Text != "m1 hello" {
		t.Fatalf("lines %+v", l.Lines)
	}
	if len(l.Failed) != 3 || l.Failed[0].Machine != "m2" || !strings.Contains(l.Failed[0].Error, "upgrade it") ||
		l.Failed[1].Machine != "m3" || !strings.Contains(l.Failed[1].Error, "logstore plugin") ||
		!strings.Contains(l.Failed[1].Error, rpc.CapLogHistory) || l.Failed[2].Machine != "m4" {
		t.Fatalf("failed %+v", l.Failed)
	}
	if p := strings.Join(l.Partial(), ","); p != "m2,m3,m4" {
		t.Fatalf("partial %s", p)
	}
	if len(f.calls) != 1 {
		t.Fatalf("calls beyond the fan-out: %v", f.calls)
	}
}
