package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// topRefresh paces `ployz top`'s live view; topFetchTimeout bounds one
// refresh, so a Machine that hangs is named instead of freezing the view.
const (
	topRefresh      = 2 * time.Second
	topFetchTimeout = 5 * time.Second
)

func topCommand() *cobra.Command {
	var machine string
	var once bool
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Every Container's CPU and memory across the Cluster, live (from the last 10 s samples)",
		Long: `Show every Container's CPU and memory across the Cluster, busiest first.
On a terminal the view refreshes every 2 s until q or Ctrl-C (the screen is
restored); --once, --json or output that is not a terminal print one
snapshot. A Machine that does not answer is named.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withSession(c, func(s session) error {
				t := machineTarget(machine)
				if out, ok := liveTerminal(c.OutOrStdout(), once || g.json); ok {
					return topLive(c.Context(), s.ent, t, out)
				}
				rows, ms, err := observe.Top(c.Context(), s.ent, t)
				if err != nil {
					return err
				}
				if g.json {
					if err := printJSON(c.OutOrStdout(), map[string]any{"containers": rows, "machines": observe.Failed(ms)}); err != nil {
						return err
					}
				} else {
					printTop(c.OutOrStdout(), rows, 0)
					for _, f := range observe.Failed(ms) {
						fmt.Fprintf(c.ErrOrStderr(), "warning: machine %s did not answer: %s\n", f.Machine, f.Error)
					}
				}
				return partialMetrics(ms)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	cmd.Flags().BoolVar(&once, "once", false, "print one snapshot and exit, even on a terminal")
	return cmd
}

// liveTerminal returns out as a terminal when the live view applies: not
// refused (--once, --json) and out and stdin are terminals.
func liveTerminal(out io.Writer, oneShot bool) (*os.File, bool) {
	f, ok := out.(*os.File)
	if oneShot || !ok || !term.IsTerminal(int(f.Fd())) || !term.IsTerminal(int(os.Stdin.Fd())) {
		return nil, false
	}
	return f, true
}

// printTop prints rows as a table; maxRows > 0 keeps the first (busiest)
// ones and says how many were left out.
func printTop(w io.Writer, rows []observe.TopRow, maxRows int) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tCONTAINER\tNAMESPACE\tSERVICE\tCPU\tMEMORY")
	shown := rows
	if maxRows > 0 && len(rows) > maxRows {
		shown = rows[:maxRows-1]
	}
	for _, r := range shown {
		cpu, mem := "-", "-"
		if r.CPU != nil {
			cpu = fmt.Sprintf("%.1f%%", *r.CPU*100)
		}
		if r.Memory != nil {
			mem = fmtValue("mem.bytes", *r.Memory)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Container, r.Namespace, r.Service, cpu, mem)
	}
	tw.Flush()
	if len(shown) < len(rows) {
		fmt.Fprintf(w, "… %d more Containers (a taller terminal shows them)\n", len(rows)-len(shown))
	}
}

// topFrame renders one screen of the live view for a terminal of height
// lines: a title, the busiest rows that fit, and the Machines that did not
// answer (or the error of the whole refresh).
func topFrame(now time.Time, rows []observe.TopRow, failed []observe.Failure, fetchErr error, height int) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ployz top — %s — every %s — q or Ctrl-C quits\n\n", now.Format("15:04:05"), topRefresh)
	var warn bytes.Buffer
	if fetchErr != nil {
		fmt.Fprintf(&warn, "\nrefresh failed: %v\n", fetchErr)
	}
	for _, f := range failed {
		fmt.Fprintf(&warn, "\nmachine %s did not answer: %s\n", f.Machine, f.Error)
	}
	maxRows := 0
	if height > 0 {
		maxRows = max(height-3-strings.Count(warn.String(), "\n"), 2)
	}
	printTop(&b, rows, maxRows)
	b.Write(warn.Bytes())
	return b.String()
}

// topLive redraws the view on the alternate screen every topRefresh until
// q, Ctrl-C or ctx ends, then restores the terminal.
func topLive(ctx context.Context, c observe.Caller, t rpc.Target, out *os.File) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	in := int(os.Stdin.Fd())
	old, err := term.MakeRaw(in) // q arrives without Enter; Ctrl-C arrives as a byte
	if err != nil {
		return fmt.Errorf("top: terminal: %w", err)
	}
	defer term.Restore(in, old)                   //nolint:errcheck // best effort on the way out
	fmt.Fprint(out, "\x1b[?1049h\x1b[?25l")       // alternate screen, cursor hidden
	defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l") // restored
	go watchKeys(os.Stdin, quit)
	tick := time.NewTicker(topRefresh)
	defer tick.Stop()
	for {
		fctx, cancel := context.WithTimeout(ctx, topFetchTimeout)
		rows, ms, err := observe.Top(fctx, c, t)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		_, height, _ := term.GetSize(int(out.Fd()))
		frame := topFrame(time.Now(), rows, observe.Failed(ms), err, height)
		// Raw mode turns off the terminal's \n → \r\n.
		fmt.Fprint(out, "\x1b[H\x1b[2J"+strings.ReplaceAll(frame, "\n", "\r\n"))
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watchKeys calls quit when r (a raw terminal) gives q, Q, Ctrl-C or
// Ctrl-D, or ends.
func watchKeys(r io.Reader, quit func()) {
	buf := make([]byte, 64)
	for {
		n, err := r.Read(buf)
		for _, k := range buf[:n] {
			if k == 'q' || k == 'Q' || k == 3 || k == 4 {
				quit()
				return
			}
		}
		if err != nil {
			quit()
			return
		}
	}
}
