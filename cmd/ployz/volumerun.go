package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumerun"
)

// Volume Runs are driven by core/volumerun; the commands here read
// flags, print its events on stderr and the run it ends with on stdout.

// volumeRunner is the volume library on s, its progress printed on c's
// stderr.
func volumeRunner(c *cobra.Command, s *client.Session) *volumerun.Runner {
	return client.VolumeRunner(s, render.VolumeEvent(c.ErrOrStderr()))
}

// runVolumeCmd checks NAME, then runs fn with the volume library; Ctrl-C
// cancels the run (which undoes what it can), and the run it ended with,
// or why none was needed, is printed.
func runVolumeCmd(c *cobra.Command, name string, fn func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error)) error {
	if err := volumerun.CheckName(name); err != nil {
		return err
	}
	return withClient(c, func(s *client.Session) error {
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := fn(ctx, volumeRunner(c, s))
		return printRun(c, res, err)
	})
}

// printRun prints how a run command ended and answers its error.
func printRun(c *cobra.Command, res volumerun.Result, err error) error {
	switch {
	case res.Nothing != nil && g.json:
		return printJSON(c.OutOrStdout(), map[string]any{"run": nil, "writer": res.Nothing.Writer, "message": res.Nothing.Message})
	case res.Nothing != nil:
		render.VolumeRunEnd(c.OutOrStdout(), res)
		return nil
	case res.Run != nil && g.json:
		if perr := printJSON(c.OutOrStdout(), map[string]any{"run": res.Run}); perr != nil && err == nil {
			return perr
		}
	default:
		render.VolumeRunEnd(c.OutOrStdout(), res)
	}
	return err
}

func volumeMirror() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "mirror NAME --to MACHINE",
		Short: "Volume Run: give a volume a Mirror on another Machine (a full send from the Writer)",
		Long: `A Mirror run: snapshot the Writer (run-<gen>), send it in full to --to
Machine to Machine (through this CLI where either Machine is older), then
make --to's copy a Mirror. Each step is admitted by the Machine it
touches against its own copy; a retry continues from what --to's disk
shows (a resume token, or the snapshot already there).
One run per Volume at a time, recorded in the operator store
(` + "`ployz volume runs`" + `).`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if to == "" {
				return errors.New("--to: required (the Machine that gets the Mirror)")
			}
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.Mirror(ctx, args[0], to)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the Machine that gets the Mirror (name or id; it needs a ZFS pool)")
	return cmd
}

func volumeSync() *cobra.Command {
	return &cobra.Command{
		Use:   "sync NAME",
		Short: "Volume Run: refresh every Mirror of a volume (an incremental send from the Writer)",
		Long: `A Sync run: snapshot the Writer (run-<gen>) and send each Mirror the
changes since the newest snapshot both hold, Machine to Machine. A Mirror
that fails does not stop the others; the run fails if any did.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return runVolumeCmd(c, args[0], func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error) {
				return rn.Sync(ctx, args[0])
			})
		},
	}
}

func volumeSetCopy() *cobra.Command {
	var machine, expect, want string
	var gen uint64
	cmd := &cobra.Command{
		Use:   "set-copy NAME --machine M --gen N --expect ROLE --want ROLE",
		Short: "Plumbing: one set_volume_copy request (a Volume Run's step) to one Machine",
		Long: `Send one set_volume_copy to --machine: move its copy of NAME from --expect
to --want (none, writer or mirror) for the run numbered --gen. The Machine
applies its transition table: a copy already at --want answers success, a
copy at neither or a --gen below its floor is refused. Volume Runs send
these themselves; this is for repair and tests.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			req := rpc.SetVolumeCopyRequest{Volume: args[0], Gen: gen, Expect: expect, Want: want}
			if err := volumerun.CheckSetCopy(machine, req); err != nil {
				return err
			}
			return withClient(c, func(s *client.Session) error {
				out, err := volumeRunner(c, s).SetCopy(c.Context(), machine, req)
				return show(c, map[string]any{"machine": machine, "set": out}, err, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s's copy of %s: %s (floor gen %d, changed %v)\n", machine, args[0], out.Copy.Role, out.Copy.Floor, out.Changed)
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "the Machine (name or id)")
	cmd.Flags().Uint64Var(&gen, "gen", 0, "the Volume Run's gen")
	cmd.Flags().StringVar(&expect, "expect", "", "the copy the Machine should have now")
	cmd.Flags().StringVar(&want, "want", "", "the copy it should have after")
	return cmd
}

func volumeRunsCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "runs [NAME]",
		Short: "List the Volume Runs of the Cluster, every operator's, newest first",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			return withClient(c, func(s *client.Session) error {
				runs, err := volumeRunner(c, s).Runs(c.Context(), name, limit)
				return show(c, map[string]any{"runs": append([]operator.VolumeRun{}, runs...)}, err, func(w io.Writer) error { return render.VolumeRuns(w, runs) })
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many")
	return cmd
}
