//go:build linux

// Command ployz-lab is `ployz lab`: a local lab of Machines as containers on
// a Linux host. It is its own binary so that the ployz CLI links nothing
// from e2e/ and cross-builds for macOS; `ployz lab ARGS` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/internal/version"
)

func main() {
	root := labCommand()
	root.Use = "lab"
	// Help and errors name the command as users type it (`ployz lab up`),
	// not as `ployz up`: cobra names a command by Use's first word.
	root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "ployz lab"}
	root.Version = version.Version
	root.SilenceUsage = true
	root.SilenceErrors = true
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ployz lab:", err)
		os.Exit(1)
	}
}
