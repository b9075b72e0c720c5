package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
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
			bin, err := client.FindSibling(labBinary, "Linux only; make build puts it in bin/")
			if err != nil {
				return fmt.Errorf("ployz lab needs %w", err)
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
