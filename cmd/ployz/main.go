// Command ployz is the operator's CLI: it plans and drives every
// multi-Machine operation itself.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/internal/version"
)

func main() {
	root := &cobra.Command{
		Use:           "ployz",
		Short:         "Deploy containers across your own Machines",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return envDefaults(cmd)
		},
	}
	addGlobalFlags(root)
	root.AddCommand(subcommands()...)
	if err := root.Execute(); err != nil {
		os.Exit(report(os.Stderr, err))
	}
}
