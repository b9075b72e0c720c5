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

// topRefresh is `ployz top`'s default pace: the metrics plugin samples
// every 10 s, so a faster refresh mostly redraws the same sample.
// topFetchTimeout bounds one refresh, so a Machine that hangs is named
// instead of freezing the view.
const (
	topRefresh      = 10 * time.Second
	topMinInterval  = time.Second
	topFetchTimeout = 5 * time.Second
)

func topCommand() *cobra.Command {
	var machine string
	var once bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Every Container's CPU and memory across the Cluster, live (from the last 10 s samples)",
		Long: `Show every Container's CPU and memory across the Cluster, busiest first.
On a terminal the view refreshes in place every 10 s (the sample interval;
--interval to change it) until q or Ctrl-C, then the screen is restored; its
header says when it was drawn and names any Machine that did not answer.
--once, --json or output that is not a terminal print one snapshot and exit.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if interval < topMinInterval {
				return fmt.Errorf("--interval: %s is below the minimum of %s", interval, topMinInterval)
			}
			return withSession(c, func(s session) error {
				t := machineTarget(machine)
				if out, ok := liveTerminal(c.OutOrStdout(), once || g.json); ok {
					return topLive(c.Context(), s.ent, t, out, interval)
				}
				return topOnce(c, s, t)
			})
		},
	}
	cmd.Flags().StringVar(&machine, "machine", "", "only this Machine (name or id)")
	cmd.Flags().BoolVar(&once, "once", false, "print one snapshot and exit, even on a terminal")
	cmd.Flags().DurationVar(&interval, "interval", topRefresh, "how often the live view refreshes (at least 1s)")
	return cmd
}

// topOnce prints one snapshot: a table (Machines that did not answer on
// stderr) or, with --json, the rows and failures.
func topOnce(c *cobra.Command, s session, t rpc.Target) error {
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
// lines: a header (when it was drawn, the pace, the Machines that did not
// answer or the error of the whole refresh), then the busiest rows that fit.
func topFrame(now time.Time, every time.Duration, rows []observe.TopRow, failed []observe.Failure, fetchErr error, height int) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ployz top — %s — every %s — q or Ctrl-C quits\n", now.Format("15:04:05"), every)
	if fetchErr != nil {
		fmt.Fprintf(&b, "refresh failed: %v\n", fetchErr)
	}
	if len(failed) > 0 {
		names := make([]string, 0, len(failed))
		for _, f := range failed {
			names = append(names, f.Machine)
		}
		fmt.Fprintf(&b, "no answer from %s:\n", strings.Join(names, ", "))
		for _, f := range failed {
			fmt.Fprintf(&b, "  %s: %s\n", f.Machine, f.Error)
		}
	}
	b.WriteString("\n")
	maxRows := 0
	if height > 0 {
		maxRows = max(height-strings.Count(b.String(), "\n")-1, 2)
	}
	printTop(&b, rows, maxRows)
	return b.String()
}

// topLoop is the live view's refresh: fetch, draw a frame, wait for the
// next tick, until ctx ends. Its parts are fields so a test drives it with
// a fake Cluster, screen and clock.
type topLoop struct {
	every   time.Duration
	timeout time.Duration // of one fetch
	fetch   func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error)
	draw    func(frame string)
	height  func() int
	now     func() time.Time
}

// run draws a frame at once, then one per tick, and returns when ctx ends.
func (l topLoop) run(ctx context.Context, ticks <-chan time.Time) {
	for {
		fctx, cancel := context.WithTimeout(ctx, l.timeout)
		rows, failed, err := l.fetch(fctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.draw(topFrame(l.now(), l.every, rows, failed, err, l.height()))
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

// topLive redraws the view on the alternate screen every interval until
// q, Ctrl-C or ctx ends, then restores the terminal.
func topLive(ctx context.Context, c observe.Caller, t rpc.Target, out *os.File, every time.Duration) error {
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
	tick := time.NewTicker(every)
	defer tick.Stop()
	topLoop{every: every, timeout: topFetchTimeout, now: time.Now,
		fetch: func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error) {
			rows, ms, err := observe.Top(ctx, c, t)
			return rows, observe.Failed(ms), err
		},
		height: func() int { _, h, _ := term.GetSize(int(out.Fd())); return h },
		// Raw mode turns off the terminal's \n → \r\n.
		draw: func(frame string) { fmt.Fprint(out, "\x1b[H\x1b[2J"+strings.ReplaceAll(frame, "\n", "\r\n")) },
	}.run(ctx, tick.C)
	return nil
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
