package main

import (
	"context"
	"encoding/json"
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
// names in its header the time, the pace and a Machine that did not answer.
func TestTopFrameFitsTheTerminal(t *testing.T) {
	var rows []observe.TopRow
	for i := 0; i < 30; i++ {
		cpu := float64(30-i) / 10
		rows = append(rows, observe.TopRow{Machine: "m1", Container: fmt.Sprintf("web-%02d", i), Service: "web", CPU: &cpu})
	}
	frame := topFrame(time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC), 10*time.Second, rows,
		[]observe.Failure{{Machine: "m3", Error: "unreachable"}, {Machine: "m4", Error: "timed out"}}, nil, 12)
	if n := strings.Count(frame, "\n"); n > 12 {
		t.Fatalf("a frame of %d lines for a 12-line terminal:\n%s", n, frame)
	}
	for _, want := range []string{"01:02:03", "every 10s", "q or Ctrl-C quits", "web-00", "300.0%", "more Containers", "m3: unreachable", "m4: timed out"} {
		if !strings.Contains(frame, want) {
			t.Errorf("frame lacks %q:\n%s", want, frame)
		}
	}
	if header, _, _ := strings.Cut(frame, "MACHINE"); !strings.Contains(header, "no answer from m3, m4") {
		t.Errorf("the header does not name the Machines that did not answer:\n%s", frame)
	}
	if strings.Contains(frame, "web-29") {
		t.Errorf("the idlest row is shown in a short terminal:\n%s", frame)
	}
	if frame := topFrame(time.Now(), time.Second, rows, nil, nil, 0); !strings.Contains(frame, "web-29") || strings.Contains(frame, "no answer") {
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
// A Container's escape sequences are shown, not run, in text; --json
// keeps the raw text, JSON-escaped.
func TestLogLinesNeutraliseControls(t *testing.T) {
	l := observe.Line{Machine: "m1", LogRecord: rpc.LogRecord{ContainerName: "web-1", Text: "\x1b]0;owned\x07\x1b[2Jhi\r"}}
	var text, js strings.Builder
	printLine(&text, l, false)
	printLine(&js, l, true)
	if strings.ContainsAny(text.String(), "\x1b\x07\r") || !strings.Contains(text.String(), `| \x1b]0;owned\x07\x1b[2Jhi\x0d`) {
		t.Errorf("text line %q", text.String())
	}
	var back observe.Line
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil || back.Text != l.Text || strings.ContainsRune(js.String(), 0x1b) {
		t.Errorf("json line %q: %v", js.String(), err)
	}
}

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

// TestTopLoopRefreshesInPlace: the live view draws a frame at once and one
// per tick with what the Cluster answers then (a Machine that stops
// answering is named, one that hangs is cut off by the fetch timeout and
// the view goes on), and returns when its context ends.
func TestTopLoopRefreshesInPlace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	frames := make(chan string, 1)
	clock := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	fetches := 0
	l := topLoop{every: 10 * time.Second, timeout: 50 * time.Millisecond, height: func() int { return 0 },
		now:  func() time.Time { return clock },
		draw: func(f string) { frames <- f },
		fetch: func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error) {
			fetches++
			cpu := float64(fetches) / 10
			rows := []observe.TopRow{{Machine: "m1", Container: "burn-1", Service: "burn", CPU: &cpu}}
			switch fetches {
			case 2:
				return rows, []observe.Failure{{Machine: "m2", Error: "unreachable"}}, nil
			case 3:
				<-ctx.Done() // a Machine that hangs
				return nil, nil, ctx.Err()
			}
			return rows, nil, nil
		}}
	done := make(chan struct{})
	go func() { l.run(ctx, ticks); close(done) }()
	want := []func(string) bool{
		func(f string) bool {
			return strings.Contains(f, "07:00:00") && strings.Contains(f, "10.0%") && !strings.Contains(f, "no answer")
		},
		func(f string) bool {
			return strings.Contains(f, "07:00:10") && strings.Contains(f, "20.0%") && strings.Contains(f, "no answer from m2")
		},
		func(f string) bool { return strings.Contains(f, "refresh failed: context deadline exceeded") },
		func(f string) bool { return strings.Contains(f, "40.0%") && !strings.Contains(f, "refresh failed") },
	}
	for i, ok := range want {
		if i > 0 {
			clock = clock.Add(10 * time.Second)
			ticks <- clock
		}
		select {
		case f := <-frames:
			if !ok(f) {
				t.Fatalf("frame %d:\n%s", i+1, f)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no frame %d", i+1)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
	if fetches != 4 {
		t.Fatalf("%d fetches for 4 frames", fetches)
	}
}
