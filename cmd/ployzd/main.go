// Command ployzd is the Ployz core daemon that runs on every Machine.
package main

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/launcher"
	"github.com/ployz/ployz/internal/version"
)

func main() {
	// Mounted into a socket-activated Container as its entrypoint,
	// ployzd is the launcher (core/launcher): it never returns on success.
	if filepath.Base(os.Args[0]) == launcher.Name {
		os.Exit(launcher.Main())
	}
	root := &cobra.Command{
		Use:           "ployzd",
		Short:         "Ployz Machine daemon",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(subcommands()...)
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
