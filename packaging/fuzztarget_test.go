package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGo writes a `go` that prints the given outputs on successive runs
// (exit 1 for each but the last, which exits with last) and, when crash
// is set, writes an input under testdata/fuzz like a real finding.
func fakeGo(t *testing.T, dir string, outputs []string, last int, crash bool) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\nn=$(cat " + dir + "/runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + dir + "/runs\n")
	for i, out := range outputs {
		code := 1
		if i == len(outputs)-1 {
			code = last
		}
		b.WriteString("if [ $n = " + string(rune('1'+i)) + " ]; then\n")
		if crash {
			b.WriteString("mkdir -p " + dir + "/pkg/testdata/fuzz/FuzzX && echo x > " + dir + "/pkg/testdata/fuzz/FuzzX/new\n")
		}
		b.WriteString("cat <<'OUT'\n" + out + "\nOUT\nexit " + string(rune('0'+code)) + "\nfi\n")
	}
	p := filepath.Join(dir, "go")
	if err := os.WriteFile(p, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func runFuzzTarget(t *testing.T, goBin, dir string) (string, int, string) {
	t.Helper()
	cmd := exec.Command("bash", "fuzz-target.sh", filepath.Join(dir, "pkg"), "FuzzX", "1s")
	cmd.Env = append(os.Environ(), "GO="+goBin)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
	return string(out), code, strings.TrimSpace(string(runs))
}

const deadlineOnly = "fuzz: elapsed: 15s, execs: 115406 (0/sec)\n--- FAIL: FuzzX (15.04s)\n    context deadline exceeded\nFAIL\nexit status 1"

// TestFuzzTargetRerunsOnlyTheToolchainRace: the coordinator's bare
// deadline (go.dev/issue/75804) runs the target once more; a second one,
// a real failure message, or a written input fails the target.
func TestFuzzTargetRerunsOnlyTheToolchainRace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outputs  []string
		last     int
		crash    bool
		wantCode int
		wantRuns string
	}{
		{"deadline then pass", []string{deadlineOnly, "ok"}, 0, false, 0, "2"},
		{"deadline twice", []string{deadlineOnly, deadlineOnly}, 1, false, 1, "2"},
		{"a real failure", []string{"--- FAIL: FuzzX (1.00s)\n    fuzz_test.go:12: answer is not JSON\nFAIL"}, 1, false, 1, "1"},
		{"deadline with an input written", []string{deadlineOnly}, 1, true, 1, "1"},
		{"a failure naming the deadline among other lines", []string{"--- FAIL: FuzzX (1.00s)\n    x_test.go:3: boom\n    context deadline exceeded\nFAIL"}, 1, false, 1, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			goBin := fakeGo(t, dir, tc.outputs, tc.last, tc.crash)
			out, code, runs := runFuzzTarget(t, goBin, dir)
			if code != tc.wantCode || runs != tc.wantRuns {
				t.Errorf("exit %d after %s runs, want %d after %s:\n%s", code, runs, tc.wantCode, tc.wantRuns, out)
			}
		})
	}
}
