package main

import "github.com/spf13/cobra"

// subcommands lists ployzd's subcommands. Each area adds its constructor here
// so main stays a few lines of wiring.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		runCommand(),
		dialStdioCommand(),
		wireguardCommand(),
		pluginsCommand(),
		storeCommand(),
		upgradeCommand(),
		isolationCommand(),
	}
}
