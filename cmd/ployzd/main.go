// Command ployzd is the Ployz core daemon that runs on every Machine.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/internal/version"
)

func main() {
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
