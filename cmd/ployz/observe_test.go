package main

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/observe"
)

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
