package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client/volumerun"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Volume Runs are driven by client/volumerun; the commands here read
// flags, print its events on stderr and the run it ends with on stdout.

// volumeRunner is the volume library on s, its progress printed on c's
// stderr.
func volumeRunner(c *cobra.Command, s session) *volumerun.Runner {
	rn := &volumerun.Runner{Entry: s.ent, Store: s.st, Context: s.ctx, OnEvent: printEvent(c.ErrOrStderr()), RegistryAuth: registryAuthFor}
	rn.Lease = func(ctx context.Context, scope, command string) (context.Context, func(), error) {
		return s.client().Hold(ctx, scope, command, func(err error) { fmt.Fprintf(c.ErrOrStderr(), "warning: %v\n", err) })
	}
	return rn
}

// printEvent prints a run's events as lines: steps indented under the
// run, progress within a step further.
func printEvent(w io.Writer) func(volumerun.Event) {
	return func(e volumerun.Event) {
		switch e.Kind {
		case volumerun.EventStep:
			fmt.Fprintf(w, "  %-14s %-8s %s\n", e.Step, e.Machine, e.Text)
		case volumerun.EventProgress:
			fmt.Fprintf(w, "    %s\n", e.Text)
		case volumerun.EventNote:
			fmt.Fprintf(w, "  %s\n", e.Text)
		case volumerun.EventWarning:
			fmt.Fprintf(w, "warning: %s\n", e.Text)
		default:
			fmt.Fprintln(w, e.Text)
		}
	}
}

// runVolumeCmd checks NAME, then runs fn with the volume library; Ctrl-C
// cancels the run (which undoes what it can), and the run it ended with,
// or why none was needed, is printed.
func runVolumeCmd(c *cobra.Command, name string, fn func(ctx context.Context, rn *volumerun.Runner) (volumerun.Result, error)) error {
	if err := volumerun.CheckName(name); err != nil {
		return err
	}
	return withSession(c, func(s session) error {
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := fn(ctx, volumeRunner(c, s))
		return printRun(c, res, err)
	})
}

// printRun prints how a run command ended and answers its error.
func printRun(c *cobra.Command, res volumerun.Result, err error) error {
	switch {
	case res.Nothing != nil:
		if g.json {
			return printJSON(c.OutOrStdout(), map[string]any{"run": nil, "writer": res.Nothing.Writer, "message": res.Nothing.Message})
		}
		fmt.Fprintln(c.OutOrStdout(), res.Nothing.Message)
		return nil
	case res.Run == nil:
		return err
	case g.json:
		if perr := printJSON(c.OutOrStdout(), map[string]any{"run": res.Run}); perr != nil && err == nil {
			return perr
		}
	default:
		r := res.Run
		fmt.Fprintf(c.OutOrStdout(), "volume %s: %s run gen %d %s\n", r.Volume, r.Kind, r.Gen, r.State)
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
			return withSession(c, func(s session) error {
				out, err := volumeRunner(c, s).SetCopy(c.Context(), machine, req)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), map[string]any{"machine": machine, "set": out})
				}
				fmt.Fprintf(c.OutOrStdout(), "%s's copy of %s: %s (floor gen %d, changed %v)\n", machine, args[0], out.Copy.Role, out.Copy.Floor, out.Changed)
				return nil
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
		Short: "List the Volume Runs this computer drove (the operator store), newest first",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			return withContext(func(st *operator.Store, ctxName string) error {
				runs, err := st.VolumeRuns(ctxName, name, limit)
				if err != nil {
					return err
				}
				if g.json {
					if runs == nil {
						runs = []operator.VolumeRun{}
					}
					return printJSON(c.OutOrStdout(), map[string]any{"runs": runs})
				}
				tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VOLUME\tGEN\tKIND\tTARGET\tSTATE\tSTARTED\tSTEPS")
				for _, r := range runs {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\n", r.Volume, r.Gen, r.Kind, r.Target, r.State, r.Started.Local().Format(time.DateTime), len(r.Steps))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many")
	return cmd
}
