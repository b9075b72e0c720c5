package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if v, err := parseWhen("since", "2h", now); err != nil || v != now.Add(-2*time.Hour).UnixNano() {
		t.Fatalf("2h = %v %v", v, err)
	}
	if v, err := parseWhen("until", "2026-12-01T10:00:00Z", now); err != nil || v != now.Add(-2*time.Hour).UnixNano() {
		t.Fatalf("rfc3339 = %v %v", v, err)
	}
	if _, err := parseWhen("since", "yesterday", now); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("bad value: %v", err)
	}
}

// TestMergeHistoryNamesEveryMachine: lines of all Machines merge by time,
// a refusing or omitted Machine is listed, never dropped silently.
func TestMergeHistoryNamesEveryMachine(t *testing.T) {
	h1, _ := json.Marshal(rpc.LogHistory{Lines: []rpc.LogRecord{{Time: 1, Text: "a1"}, {Time: 3, Text: "a3"}}})
	h2, _ := json.Marshal(rpc.LogHistory{Lines: []rpc.LogRecord{{Time: 2, Text: "b2"}}, Gaps: []rpc.LogGap{{From: 0, To: 1, Reason: "deleted by retention (size cap)"}}})
	fr := rpc.FanoutResult{
		Results: []rpc.TargetResult{{MachineName: "m1", Payload: h1}, {MachineName: "m2", Payload: h2},
			{MachineName: "m3", Error: rpc.Errorf(rpc.CodeUnavailable, "capability ployz.logs.history.v1 is unavailable").With("capability", rpc.CapLogHistory)}},
		Omitted: []rpc.Omission{{MachineName: "m4", Reason: "unreachable"}},
	}
	lines, failed, notes := mergeHistory(fr, rpc.LogHistoryRequest{Limit: 2, Newest: true})
	if len(lines) != 2 || lines[0].Text != "b2" || lines[0].Machine != "m2" || lines[1].Text != "a3" {
		t.Fatalf("lines %+v", lines)
	}
	if len(failed) != 2 || failed[0].Machine != "m3" || !strings.Contains(failed[0].Error, "logstore plugin") || failed[1].Machine != "m4" {
		t.Fatalf("failed %+v", failed)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "size cap") {
		t.Fatalf("notes %v", notes)
	}
}

func TestSparklineShowsGaps(t *testing.T) {
	ps := []rpc.MetricPoint{{Time: 0, Value: 0}, {Time: 10, Value: 1}, {Time: 30, Value: 2}}
	if got := sparkline(ps, 0, 40, 4); got != "▁▄ █" {
		t.Fatalf("sparkline %q", got)
	}
}
