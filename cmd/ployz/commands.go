package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
)

// subcommands lists ployz's top-level commands; each area adds its
// constructor here so main stays a few lines of wiring.
func subcommands() []*cobra.Command {
	return []*cobra.Command{gendocsCommand(), labCommand(), ctxCommand(), machineCommand(), imageCommand(), buildCommand(),
		deployCommand(), rollbackCommand(), lsCommand(), psCommand(), serviceCommand(), logsCommand(), scaleCommand(), restartCommand(),
		startStopCommand("start"), startStopCommand("stop"), rmCommand(), projectCommand(), execCommand(), runCommand(), ingressCommand(), certCommand(),
		metricsCommand(), topCommand(), dashboardCommand(), pluginCommand(), volumeCommand(), historyCommand(), leaseCommand(), jobsCommand(), selfUpdateCommand()}
}

// exitError carries a process exit code through cobra (3 = partial
// result). A silent one has already told the user what happened, as a
// command run inside a Machine does with its own output.
type exitError struct {
	code   int
	err    error
	silent bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// report prints err (unless it is silent) and returns the exit code.
func report(w io.Writer, err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		if !ee.silent {
			fmt.Fprintln(w, "ployz:", err)
		}
		return ee.code
	}
	fmt.Fprintln(w, "ployz:", err)
	return 1
}

// exitFor makes the library's *client.PartialError exit 3, silent when a
// --json document already said what happened; other errors pass.
func exitFor(err error, silent bool) error {
	if client.IsPartial(err) {
		return &exitError{code: 3, err: err, silent: silent}
	}
	return err
}
