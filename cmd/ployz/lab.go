package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
)

// labBinary is the lab's own binary. The lab drives Docker and the e2e/lab
// library, which the CLI must not link (it cross-builds for macOS), so
// `ployz lab ARGS` runs `ployz-lab ARGS` from beside this executable, or
// from PATH.
const labBinary = "ployz-lab"

// labCommand hands `ployz lab ...` to ployz-lab unchanged.
func labCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "lab",
		Short:              "Run a local lab of Machines as containers on this host (Linux)",
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			bin, err := findLabBinary()
			if err != nil {
				return err
			}
			cmd := exec.CommandContext(c.Context(), bin, args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
			err = cmd.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return &exitError{code: ee.ExitCode(), err: err, silent: true}
			}
			return err
		},
	}
}

func findLabBinary() (string, error) {
	if p := filepath.Join(executableDir(), labBinary); fileExists(p) {
		return p, nil
	}
	p, err := exec.LookPath(labBinary)
	if err != nil {
		return "", fmt.Errorf("ployz lab needs %s beside ployz or on PATH (Linux only; make build puts it in bin/): %w", labBinary, err)
	}
	return p, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// executableDir is where this binary lives: make build puts every binary
// in bin/, so siblings (ployz-lab, and the binaries enroll installs) are
// found there.
func executableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}
