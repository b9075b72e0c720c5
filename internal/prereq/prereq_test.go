package prereq

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing runs a test that lacks a prerequisite in a child process,
// with and without PLOYZ_REQUIRE_PRIVILEGED=1: a skip without, a failure
// naming the prerequisite with.
func TestMissing(t *testing.T) {
	if os.Getenv("PREREQ_CHILD") == "1" {
		Missing(t, "a unicorn", errors.New("none in this stable"))
		t.Log("still running after Missing")
		return
	}
	for _, tc := range []struct {
		env, want string
		fails     bool
	}{
		{"", "--- SKIP: TestMissing", false},
		{"0", "--- SKIP: TestMissing", false},
		{"1", "--- FAIL: TestMissing", true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), "PREREQ_CHILD=1", EnvRequire+"="+tc.env)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) ||
			!strings.Contains(string(out), "needs a unicorn: none in this stable") || strings.Contains(string(out), "still running") {
			t.Errorf("%s=%q: err %v, output:\n%s", EnvRequire, tc.env, err, out)
		}
	}
}
