package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/observe"
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

// TestTopFrameFitsTheTerminal: the live view's frame keeps the busiest
// rows that fit the terminal's height, says how many it left out, and
// names a Machine that did not answer.
func TestTopFrameFitsTheTerminal(t *testing.T) {
	var rows []observe.TopRow
	for i := 0; i < 30; i++ {
		cpu := float64(30-i) / 10
		rows = append(rows, observe.TopRow{Machine: "m1", Container: fmt.Sprintf("web-%02d", i), Service: "web", CPU: &cpu})
	}
	frame := topFrame(time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC), rows, []observe.Failure{{Machine: "m3", Error: "unreachable"}}, nil, 12)
	if n := strings.Count(frame, "\n"); n > 12 {
		t.Fatalf("a frame of %d lines for a 12-line terminal:\n%s", n, frame)
	}
	for _, want := range []string{"01:02:03", "q or Ctrl-C quits", "web-00", "300.0%", "more Containers", "machine m3 did not answer: unreachable"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	if strings.Contains(frame, "web-29") {
		t.Errorf("the idlest row is shown in a short terminal:\n%s", frame)
	}
	if frame := topFrame(time.Now(), rows, nil, nil, 0); !strings.Contains(frame, "web-29") {
		t.Errorf("an unknown height clips rows:\n%s", frame)
	}
}

// TestWatchKeysQuits: q, Ctrl-C (a byte in raw mode) and the end of input
// quit the live view; other keys do not.
func TestWatchKeysQuits(t *testing.T) {
	for name, in := range map[string]string{"q": "xyq", "ctrl-c": "\x03", "eof": "abc"} {
		quit := make(chan struct{})
		watchKeys(strings.NewReader(in), func() { close(quit) })
		select {
		case <-quit:
		default:
			t.Errorf("%s: did not quit", name)
		}
	}
}

// TestLogsWarningsNameMachines: notes and every Machine that did not
// answer (with why) go to stderr.
func TestLogsWarningsNameMachines(t *testing.T) {
	var b strings.Builder
	printLogsWarnings(&b, observe.Logs{Failed: []observe.Failure{{Machine: "m2", Error: "ployz.logs.history.v1 is not advertised"}, {Machine: "m3", Error: "unreachable"}},
		Notes: []string{"m1: no lines from a to b: deleted by retention (size cap)"}})
	out := b.String()
	for _, want := range []string{"note: m1: no lines", "machine m2 did not answer: ployz.logs.history.v1", "machine m3 did not answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}

func TestSparklineShowsGaps(t *testing.T) {
	ps := []rpc.MetricPoint{{Time: 0, Value: 0}, {Time: 10, Value: 1}, {Time: 30, Value: 2}}
	if got := sparkline(ps, 0, 40, 4); got != "▁▄ █" {
		t.Fatalf("sparkline %q", got)
	}
}
