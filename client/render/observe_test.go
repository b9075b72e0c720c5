package render

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// TestTopFrameFitsTheTerminal: the live view's frame keeps the busiest
// rows that fit the terminal's height, says how many it left out, and
// names in its header the time, the pace and a Machine that did not answer.
func TestTopFrameFitsTheTerminal(t *testing.T) {
	var rows []observe.TopRow
	for i := 0; i < 30; i++ {
		cpu := float64(30-i) / 10
		rows = append(rows, observe.TopRow{Machine: "m1", Container: fmt.Sprintf("web-%02d", i), Service: "web", CPU: &cpu})
	}
	frame := TopFrame(client.TopSample{At: time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC), Rows: rows,
		Failed: []observe.Failure{{Machine: "m3", Error: "unreachable"}, {Machine: "m4", Error: "timed out"}}}, 10*time.Second, 12)
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
	if frame := TopFrame(client.TopSample{At: time.Now(), Rows: rows}, time.Second, 0); !strings.Contains(frame, "web-29") || strings.Contains(frame, "no answer") {
		t.Errorf("an unknown height clips rows:\n%s", frame)
	}
}

func TestSparklineShowsGaps(t *testing.T) {
	ps := []rpc.MetricPoint{{Time: 0, Value: 0}, {Time: 10, Value: 1}, {Time: 30, Value: 2}}
	if got := sparkline(ps, 0, 40, 4); got != "▁▄ █" {
		t.Fatalf("sparkline %q", got)
	}
}
