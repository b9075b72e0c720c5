package lab

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestPingVerdict runs real ping-like processes: only "no answer" is
// unreachable; a failure to ask at all is an error, never "unreachable".
func TestPingVerdict(t *testing.T) {
	run := func(script string) (string, error) {
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	noAnswer := "echo '1 packets transmitted, 0 received, 100% packet loss, time 0ms'; exit 1"
	for name, tc := range map[string]struct {
		script    string
		reachable bool
		fails     bool
	}{
		"answered":       {"echo '1 packets transmitted, 1 received'", true, false},
		"no answer":      {noAnswer, false, false},
		"machine not up": {"echo 'Error response from daemon: container is not running'; exit 1", false, true},
		"no ping":        {"echo 'exec: \"ping\": executable file not found'; exit 127", false, true},
		"bad address":    {"echo 'ping: nope: Name or service not known'; exit 2", false, true},
	} {
		out, err := run(tc.script)
		ok, verr := pingVerdict(out, err)
		if ok != tc.reachable || (verr != nil) != tc.fails {
			t.Errorf("%s: reachable %v, error %v", name, ok, verr)
		}
	}
	if _, err := pingVerdict("", errors.New("context deadline exceeded")); err == nil {
		t.Error("a non-exit failure counted as unreachable")
	}
}
