package main

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/volumerun"
)

func volumeDeleteMirror() *cobra.Command {
	var on string
	cmd := &cobra.Command{
		Use:   "delete-mirror NAME --on MACHINE",
		Short: "Volume Run: delete a volume's Mirror on a Machine (its dataset too)",
		Long: `A Delete-mirror run: check that --on's copy of NAME is a Mirror, make it
none, then remove its dataset there. Refused before a run opens when
--on holds the Writer, or any Container on --on mounts the volume.
Nothing on the Writer changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if on == "" {
				return errors.New("--on: required (the Machine whose Mirror goes)")
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.DeleteMirror(ctx, args[0], on)
			})
		},
	}
	cmd.Flags().StringVar(&on, "on", "", "the Machine holding the Mirror (name)")
	return cmd
}

func volumeRestore() *cobra.Command {
	var from string
	var force bool
	cmd := &cobra.Command{
		Use:   "restore NAME --from MACHINE [--force]",
		Short: "Volume Run: make a Mirror the Writer when the Writer is gone, or demote an older second Writer",
		Long: `A Restore run, for a Writer that is gone: when no Machine answers as
NAME's Writer (its Machine left the Cluster, ` + "`ployz machine rm`" + `, or a
` + "`ployz volume release`" + ` demoted it), --from's Mirror becomes the Writer with a
new epoch. Writes on the old Writer
after --from's last sync are not on it. A Machine that did not answer
may still hold the Writer: --force is then required. A Machine that
answers as the Writer is never replaced (` + "`ployz volume move`" + ` hands it over).

When two Machines answer as Writer (the old one came back after a
restore), every run refuses; restore --from the one with the newer
epoch demotes the other to a Mirror: its writes since are lost. It is
refused while a running Container mounts the old copy: stop it first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("--from: required (the Machine whose copy becomes, or stays, the Writer)")
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.Restore(ctx, args[0], from, force)
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the Machine whose Mirror becomes the Writer, or the newer of two Writers (name)")
	cmd.Flags().BoolVar(&force, "force", false, "promote although a Machine that may hold the Writer did not answer")
	return cmd
}
