package prereq

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// EnvRequire names the variable that turns a missing prerequisite into a
// test failure.
const EnvRequire = "PLOYZ_REQUIRE_PRIVILEGED"

// Required reports whether missing prerequisites fail tests.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Missing ends tb for want, which the host lacks because of why: a skip,
// or a failure when Required.
func Missing(tb testing.TB, want string, why error) {
	tb.Helper()
	msg := fmt.Sprintf("needs %s: %v", want, why)
	if Required() {
		tb.Fatalf("%s (%s=1: every prerequisite must be present)", msg, EnvRequire)
	}
	tb.Skip(msg)
}

// Root ends tb unless the test runs as root.
func Root(tb testing.TB, forWhat string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Missing(tb, "root ("+forWhat+")", fmt.Errorf("running as uid %d", os.Geteuid()))
	}
}

// Command ends tb unless name is on PATH.
func Command(tb testing.TB, name string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Missing(tb, name, err)
	}
}

// File ends tb unless path exists.
func File(tb testing.TB, path string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(tb, path, err)
	}
}

// Skip ends tb on purpose, not for want of anything on the host: a lab
// scenario outside the lab run that runs it, a measurement a variable
// asks for, a helper process's entry point, a comparison against a tool
// Ployz does not install, -short. It skips even when Required; reason
// says why and what runs the test instead, and an empty one fails, so
// every skip a reviewer reads (TestNoRawSkips lists them) explains itself.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	if strings.TrimSpace(reason) == "" {
		tb.Fatal("prereq.Skip: a skip needs a reason")
	}
	tb.Skip(reason)
}
