package dockertest

import (
	"bytes"
	"os/exec"
	"testing"
)

// TestImageRunsItsScript runs the image once with every finite step and
// reads stdout and stderr back apart.
func TestImageRunsItsScript(t *testing.T) {
	img := Image(t)
	cmd := exec.Command("docker", "run", "--rm", "--network", "none", img,
		"out", "first", "err", "oops", "sleep", "10ms", "lines", "line %d", "2", "4", "raw", "tail")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker run: %v: %s", err, stderr.String())
	}
	if string(out) != "first\nline 2\nline 3\ntail" || stderr.String() != "oops\n" {
		t.Fatalf("stdout %q, stderr %q", out, stderr.String())
	}
	bad := exec.Command("docker", "run", "--rm", "--network", "none", img, "lines", "x")
	if out, err := bad.CombinedOutput(); err == nil || string(out) != "emit: step \"lines\" needs 3 arguments, has 1\n" {
		t.Fatalf("a short step must fail naming it: %v %q", err, out)
	}
}
