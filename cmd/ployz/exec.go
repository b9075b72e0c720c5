package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
)

// execCommand is `ployz exec SERVICE -- CMD...`: a process inside one of
// the Service's Containers, on whichever Machine runs it.
func execCommand() *cobra.Command {
	var f projectFlags
	var interactive, tty bool
	var container string
	cmd := &cobra.Command{
		Use:   "exec [-it] SERVICE -- COMMAND...",
		Short: "Run a command inside a Container of a Service",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				ns, err := f.namespace(c.Context(), s)
				if err != nil {
					return err
				}
				target, err := s.ServiceExecTarget(c.Context(), ns, args[0], container)
				if err != nil {
					return err
				}
				return runExec(c, s, target, args[1:], interactive, tty)
			})
		},
	}
	f.add(cmd, false)
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "send this terminal's stdin to the process")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "allocate a terminal")
	cmd.Flags().StringVar(&container, "container", "", "a Container name or ID (default: the first running one)")
	return cmd
}

// runExec runs argv in co with this terminal's stdin (interactive) in
// raw mode (tty) and exits with the process's code.
func runExec(c *cobra.Command, s *client.Session, co rpc.ContainerObservation, argv []string, interactive, tty bool) error {
	if tty && term.IsTerminal(int(os.Stdin.Fd())) {
		old, err := term.MakeRaw(int(os.Stdin.Fd()))
		if err == nil {
			defer term.Restore(int(os.Stdin.Fd()), old) // best effort on the way out
		}
	}
	o := client.ExecIO{Stdout: c.OutOrStdout(), Stderr: c.ErrOrStderr()}
	if interactive {
		o.Stdin = os.Stdin
	}
	code, err := s.Exec(c.Context(), co, argv, tty, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code, err: fmt.Errorf("exit %d", code), silent: true}
	}
	return nil
}
