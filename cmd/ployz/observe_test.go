package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
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
	render.LogsWarnings(&b, observe.Logs{Failed: []observe.Failure{{Machine: "m2", Error: "ployz.logs.history.v1 is not advertised"}, {Machine: "m3", Error: "unreachable"}},
		Notes: []string{"m1: no lines from a to b: deleted by retention (size cap)"}})
	out := b.String()
	for _, want := range []string{"note: m1: no lines", "machine m2 did not answer: ployz.logs.history.v1", "machine m3 did not answer"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}
