package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

// exitLeaseHeld is the exit code of a command refused because another
// operator's command holds its namespace, volume or enrollment.
const exitLeaseHeld = 4

// leaseWaitFor is what the Session does with a held scope: refuse, or
// with --wait wait, saying on stderr who it waits for whenever that
// changes.
func leaseWaitFor(c *cobra.Command) client.LeaseWait {
	var last string
	return client.LeaseWait{Wait: g.wait, Waiting: func(e *client.LeaseHeldError) {
		if who := e.Holder.String() + e.Command; who != last {
			last = who
			fmt.Fprintf(c.ErrOrStderr(), "waiting: %v\n", e)
		}
	}}
}

// leaseRefusal turns a held scope into exit 4; with --json the error is
// also one JSON document on stdout naming the holder.
func leaseRefusal(stdout io.Writer, err error) error {
	var held *client.LeaseHeldError
	if !errors.As(err, &held) {
		return err
	}
	if g.json {
		printJSON(stdout, map[string]any{"error": err.Error(), "lease": held}) // the exit code tells it too
	}
	return &exitError{code: exitLeaseHeld, err: fmt.Errorf("%w (or pass --wait)", err)}
}

func leaseCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "lease", Short: "Leases: which operator's command holds a namespace, volume or enrollment"}
	cmd.AddCommand(&cobra.Command{
		Use:   "ls",
		Short: "List the live leases",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ls, err := s.Leases(c.Context())
				return show(c, ls, err, func(w io.Writer) error { return render.Leases(w, ls) })
			})
		},
	})
	return cmd
}
