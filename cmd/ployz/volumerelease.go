package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/volumerun"
)

func volumeRelease() *cobra.Command {
	var o volumerun.ReleaseOptions
	cmd := &cobra.Command{
		Use:   "release NAME [--force]",
		Short: "Volume Run: the Writer steps down, leaving every copy of a volume a read-only Mirror",
		Long: `A Release run, for planned maintenance or decommissioning of the Writer's
Machine before a new Writer is chosen: snapshot the Writer and send each
Mirror the changes while the Service Containers mounting the volume keep
running; then the cut: stop those Containers, take a final snapshot and
send it to every Mirror; then demote the Writer to a Mirror (the point of
no return). The volume is left with no Writer and every copy identical
and read-only.

The Containers stay stopped: a Deploy of a Service mounting a volume
with no Writer is refused. ` + "`ployz volume restore NAME --from MACHINE`" + ` makes
one of the copies the Writer again (then deploy, or start the Containers).

Before the point of no return a failure is undone: the stopped
Containers are started and the Writer is unchanged. Running a release
again continues from what the disks show; with the Writer already
demoted there is nothing to do.

It is refused, changing nothing, when the volume has no Writer or two,
or a Machine does not answer (it may hold a copy that would be left
behind). With no Mirror the only copy would be left read-only with no
second copy: --force is then required.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if o.Grace < 0 {
				return fmt.Errorf("--grace: must be at least 0, got %s", o.Grace)
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.Release(ctx, args[0], o)
			})
		},
	}
	cmd.Flags().BoolVar(&o.Force, "force", false, "release although the volume has no Mirror (its only copy becomes read-only)")
	cmd.Flags().DurationVar(&o.Grace, "grace", 10*time.Second, "how long each Container gets to stop at the cut")
	return cmd
}
