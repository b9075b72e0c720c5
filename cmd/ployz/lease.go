package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
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
		printJSON(stdout, map[string]any{"error": err.Error(), "lease": map[string]any{ //nolint:errcheck // the exit code tells it too
			"scope": held.Scope, "holder": held.Holder, "command": held.Command,
			"since": held.Since.UTC().Format(time.RFC3339), "expires": held.Expires.UTC().Format(time.RFC3339)}})
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
				if err != nil || g.json {
					if err == nil {
						err = printJSON(c.OutOrStdout(), ls)
					}
					return err
				}
				tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "SCOPE\tHOLDER\tCOMMAND\tSINCE\tEXPIRES")
				for _, l := range ls {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Scope, l.Holder.Name, l.Command,
						time.UnixMilli(l.Started).UTC().Format(time.RFC3339), time.UnixMilli(l.Expires).UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	})
	return cmd
}
