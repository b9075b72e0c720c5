package observe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// fakeEntry answers a log_history fan-out and, per Machine id, the
// Docker-direct calls of the fallback.
type fakeEntry struct {
	fr         rpc.FanoutResult
	containers map[string][]rpc.ContainerObservation
	logs       map[string][]rpc.LogLine // by Container id
	failList   map[string]error
	calls      []string
}

func (f *fakeEntry) Fanout(_ context.Context, _ rpc.Target, command string, _ any) (rpc.FanoutResult, error) {
	f.calls = append(f.calls, command)
	return f.fr, nil
}

func (f *fakeEntry) Call(_ context.Context, t rpc.Target, command string, payload, out any) error {
	f.calls = append(f.calls, command+" "+t.One)
	var v any
	switch command {
	case rpc.CmdListContainers:
		if err := f.failList[t.One]; err != nil {
			return err
		}
		req := payload.(rpc.ListContainersRequest)
		var cs []rpc.ContainerObservation
		for _, c := range f.containers[t.One] {
			if req.Namespace == "" || c.Namespace == req.Namespace {
				cs = append(cs, c)
			}
		}
		v = rpc.ContainerList{MachineID: t.One, Containers: cs}
	case rpc.CmdContainerLogs:
		req := payload.(rpc.ContainerLogsRequest)
		lines := f.logs[req.ID]
		if len(lines) > req.Tail {
			lines = lines[len(lines)-req.Tail:]
		}
		v = rpc.ContainerLogs{Lines: lines}
	default:
		return fmt.Errorf("unexpected %s", command)
	}
	b, _ := json.Marshal(v)
	return json.Unmarshal(b, out)
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

// TestHistoryFallsBackToDocker: m1 answers from its Log Store; m2's
// ployzd predates log_history, so its existing Containers of the Service
// are read through container_logs, filtered like the Log Store would
// (range, grep, Service), marked as Docker's and merged by time; m3's
// plugin is down and its fallback fails too, so it is named with both
// reasons; an omitted m4 is named.
func TestHistoryFallsBackToDocker(t *testing.T) {
	web := func(id, name string) rpc.ContainerObservation {
		return rpc.ContainerObservation{ID: id, Name: name, Namespace: "p-prod", Service: "web", Deployment: "dep2"}
	}
	f := &fakeEntry{
		fr: rpc.FanoutResult{
			Results: []rpc.TargetResult{
				{MachineID: "id1", MachineName: "m1", Payload: history(t, []rpc.LogRecord{{Time: 100, Text: "m1 hello"}, {Time: 300, Text: "m1 hello again"}})},
				{MachineID: "id2", MachineName: "m2", Error: oldDaemon},
				{MachineID: "id3", MachineName: "m3", Error: pluginDown}},
			Omitted: []rpc.Omission{{MachineID: "id4", MachineName: "m4", Reason: "unreachable"}},
		},
		containers: map[string][]rpc.ContainerObservation{"id2": {web("c2web", "web-2"),
			{ID: "c2db", Name: "db-1", Namespace: "p-prod", Service: "db"}}},
		logs: map[string][]rpc.LogLine{
			"c2web": {{Time: 50, Text: "m2 too early"}, {Time: 200, Text: "m2 hello"}, {Time: 250, Text: "m2 other"}, {Time: 400, Text: "m2 hello late"}},
			"c2db":  {{Time: 200, Text: "db hello"}},
		},
		failList: map[string]error{"id3": errors.New("connection refused")},
	}
	req := rpc.LogHistoryRequest{LogQuery: rpc.LogQuery{Namespace: "p-prod", Service: "web", Grep: "hello"}, Since: 60, Until: 350, Limit: 100}
	l, err := History(context.Background(), f, rpc.Target{All: true}, req)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ln := range l.Lines {
		got = append(got, ln.Machine+":"+ln.Source+":"+ln.Text)
	}
	if want := "m1::m1 hello,m2:docker:m2 hello,m1::m1 hello again"; strings.Join(got, ",") != want {
		t.Fatalf("lines %s\nwant  %s", strings.Join(got, ","), want)
	}
	if ln := l.Lines[1]; ln.ContainerName != "web-2" || ln.Service != "web" || ln.Deployment != "dep2" {
		t.Fatalf("fallback line lacks its Container: %+v", ln)
	}
	if len(l.Fallback) != 1 || l.Fallback[0].Machine != "m2" || l.Fallback[0].Containers != 1 || !strings.Contains(l.Fallback[0].Reason, "upgrade it") {
		t.Fatalf("fallback %+v", l.Fallback)
	}
	if len(l.Failed) != 2 || l.Failed[0].Machine != "m3" || !strings.Contains(l.Failed[0].Error, "logstore plugin") ||
		!strings.Contains(l.Failed[0].Error, "connection refused") || l.Failed[1].Machine != "m4" {
		t.Fatalf("failed %+v", l.Failed)
	}
	if p := strings.Join(l.Partial(), ","); p != "m3,m4,m2 (fallback)" {
		t.Fatalf("partial %s", p)
	}
	for _, c := range f.calls {
		if strings.HasPrefix(c, rpc.CmdContainerLogs) && !strings.HasSuffix(c, "id2") {
			t.Fatalf("container_logs asked of a Machine that did not need it: %v", f.calls)
		}
	}
}

// TestHistoryFallbackKeepsTheNewest: without --since the newest Limit
// lines of the merged answer are kept, the fallback's included.
func TestHistoryFallbackKeepsTheNewest(t *testing.T) {
	f := &fakeEntry{
		fr: rpc.FanoutResult{Results: []rpc.TargetResult{
			{MachineID: "id1", MachineName: "m1", Payload: history(t, []rpc.LogRecord{{Time: 1, Text: "a"}, {Time: 4, Text: "d"}})},
			{MachineID: "id2", MachineName: "m2", Error: oldDaemon}}},
		containers: map[string][]rpc.ContainerObservation{"id2": {{ID: "c2", Name: "web-2", Service: "web"}}},
		logs:       map[string][]rpc.LogLine{"c2": {{Time: 2, Text: "b"}, {Time: 3, Text: "c"}, {Time: 5, Text: "e"}}},
	}
	l, err := History(context.Background(), f, rpc.Target{All: true}, rpc.LogHistoryRequest{LogQuery: rpc.LogQuery{Service: "web"}, Limit: 3, Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ln := range l.Lines {
		got = append(got, ln.Text)
	}
	if strings.Join(got, "") != "cde" {
		t.Fatalf("newest 3: %v", got)
	}
}
