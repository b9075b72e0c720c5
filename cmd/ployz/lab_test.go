package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabRunsLabBinary: `ployz lab ARGS` runs ployz-lab from PATH with
// ARGS untouched (flags included) and returns its exit status.
func TestLabRunsLabBinary(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "args")
	script := "#!/bin/sh\necho \"$@\" > " + out + "\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, labBinary), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	cmd := labCommand()
	cmd.SetArgs([]string{"ls", "--json", "--name", "x"})
	err := cmd.Execute()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("Execute = %v, want exit status 3", err)
	}
	b, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); got != "ls --json --name x" {
		t.Fatalf("ployz-lab got %q", got)
	}
}

func TestLabWithoutLabBinarySaysWhere(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cmd := labCommand()
	cmd.SetArgs([]string{"ls"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "ployz-lab beside ployz or on PATH") {
		t.Fatalf("Execute = %v", err)
	}
}
