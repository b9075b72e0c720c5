package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// imageCommand is `ployz image`: images reach Machines without a registry.
func imageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Deliver images to Machines without a registry"}
	var machines []string
	push := &cobra.Command{
		Use:   "push IMAGE",
		Short: "Stream a local image into the Docker of every Machine that misses it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withEntry(c, func(ent *rpc.Client, _ *operator.Store) error {
				bars := map[string]*progressbar.ProgressBar{}
				tty := term.IsTerminal(int(os.Stderr.Fd())) && !g.json
				progress := func(machine string, sent, total int64) {
					if !tty {
						return
					}
					b, ok := bars[machine]
					if !ok {
						b = progressbar.DefaultBytes(total, "pushing to "+machine)
						bars[machine] = b
					}
					b.Set64(sent) //nolint:errcheck // display only
				}
				res, err := images.Push(c.Context(), ent, args[0], machines, progress)
				if err != nil {
					return err
				}
				partial := false
				for _, r := range res {
					partial = partial || r.Outcome == "failed"
				}
				if g.json {
					if err := printJSON(c.OutOrStdout(), res); err != nil {
						return err
					}
				} else {
					w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
					fmt.Fprintln(w, "MACHINE\tOUTCOME\tBYTES\tERROR")
					for _, r := range res {
						fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", r.MachineName, r.Outcome, r.Bytes, r.Error)
					}
					w.Flush()
				}
				if partial {
					return &exitError{code: 3, err: fmt.Errorf("image %s did not reach every Machine", args[0]), silent: g.json}
				}
				return nil
			})
		},
	}
	push.Flags().StringSliceVarP(&machines, "machine", "m", nil, "target Machine (repeatable; default: every Machine)")
	cmd.AddCommand(push)
	return cmd
}
