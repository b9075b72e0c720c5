package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/volumerun"
)

func volumeMove() *cobra.Command {
	var to string
	var o volumerun.MoveOptions
	cmd := &cobra.Command{
		Use:   "move NAME --to MACHINE",
		Short: "Volume Run: move a volume's Writer, and the Containers mounting it, to another Machine",
		Long: `A Move run: snapshot the Writer and send it to --to while the Service
Containers mounting the volume keep running; then the cut: stop them,
demote the Writer to a Mirror, send the last changes, make --to the
Writer (the point of no return) and create the same Containers there
(same spec and deployment, so ingress and DNS follow), wait until they
are ready and remove the old ones. The source keeps a Mirror.

Before the point of no return a failure is undone: the source is made
the Writer again and its Containers are started. After it, running the
same move again finishes the job: with --to already the Writer it reads
the stopped source Containers again and creates (under the same creation
keys, so none twice), starts and waits for them on --to, moves the
Serving Pointers and removes the old ones; with nothing left it says so.
The downtime (stop on the source → ready on --to) is printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to: required (the Machine that becomes the Writer)")
			}
			if o.Grace < 0 || o.ReadyTimeout < time.Second {
				return fmt.Errorf("--grace must be at least 0 and --ready-timeout at least 1s (got %s, %s)", o.Grace, o.ReadyTimeout)
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.Move(ctx, args[0], to, o)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the Machine that becomes the Writer (name or id; it needs a ZFS pool)")
	cmd.Flags().DurationVar(&o.Grace, "grace", 10*time.Second, "how long each Container gets to stop at the cut")
	cmd.Flags().DurationVar(&o.ReadyTimeout, "ready-timeout", 2*time.Minute, "how long each new Container may take to become ready")
	return cmd
}
