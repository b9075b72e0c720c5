package render

import (
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// A Container's escape sequences reach the terminal as visible text: no
// ESC, CSI, BEL, carriage return or other C0/C1 control survives, and
// tab, newline and ordinary Unicode stay as they are.
func TestTerminalNeutralisesControls(t *testing.T) {
	for in, want := range map[string]string{
		"plain line ✓":                       "plain line ✓",
		"tab\tand\nnewline":                  "tab\tand\nnewline",
		"\x1b[2J\x1b[Hcleared":               `\x1b[2J\x1b[Hcleared`,
		"\x1b]0;pwned title\x07":             `\x1b]0;pwned title\x07`,
		"over\rwrite":                        `over\x0dwrite`,
		"del\x7f nul\x00":                    `del\x7f nul\x00`,
		"c1 csi \u009b31m and \u0085":        `c1 csi \u009b31m and \u0085`,
		"raw 8-bit csi \x9b31m":              `raw 8-bit csi \x9b31m`,
		"bad utf8 \xff\xfe then é":           `bad utf8 \xff\xfe then é`,
		"the replacement char \uFFFD itself": "the replacement char \uFFFD itself",
	} {
		got := Terminal(in)
		if got != want {
			t.Errorf("Terminal(%q) = %q, want %q", in, got, want)
		}
		for _, r := range got {
			if r != '\t' && r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)) {
				t.Errorf("Terminal(%q) keeps control %U", in, r)
			}
		}
	}
}

func TestLogLine(t *testing.T) {
	r := rpc.LogRecord{ContainerName: "web-1", Time: time.Date(2026, 12, 4, 10, 0, 1, 5e6, time.UTC).UnixNano(), Text: "GET / \x1b[31mred\x1b[0m"}
	got := LogLine("m1", r)
	if want := `m1 web-1 10:00:01.005 | GET / \x1b[31mred\x1b[0m` + "\n"; got != want {
		t.Fatalf("LogLine = %q, want %q", got, want)
	}
	if strings.ContainsRune(got, 0x1b) {
		t.Fatal("an ESC reached the line")
	}
}
