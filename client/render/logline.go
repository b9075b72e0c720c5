package render

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// LogLine is one log line as `ployz logs` prints it: Machine, Container,
// time and text, with every control character neutralised (Terminal).
func LogLine(machine string, r rpc.LogRecord) string {
	return Terminal(fmt.Sprintf("%s %s %s | %s", machine, ContainerLabel(r), LogTime(r.Time), r.Text)) + "\n"
}

// Terminal makes s safe to write to a terminal: a Container's output is
// not the operator's, and ESC, CSI and other C0/C1 controls in it would
// move the cursor, rewrite earlier lines, set the window title or worse.
// Tab and newline stay; every other control, DEL and any byte that is
// not UTF-8 is shown escaped (\x1b, \u009b), so nothing is lost.
func Terminal(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if !clean || unsafe(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafe is a control a terminal may act on. (A byte that is not UTF-8,
// which some terminals read as an 8-bit C1 control, is escaped too.)
func unsafe(r rune) bool {
	if r == '\t' || r == '\n' {
		return false
	}
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f)
}

// LogsWarnings names, after a history's lines, what the Machines noted and
// each Machine that did not answer (their text neutralised like lines).
func LogsWarnings(w io.Writer, logs observe.Logs) {
	for _, n := range logs.Notes {
		fmt.Fprintln(w, "note:", Terminal(n))
	}
	for _, m := range logs.Failed {
		fmt.Fprintf(w, "warning: machine %s did not answer: %s\n", m.Machine, Terminal(m.Error))
	}
}
