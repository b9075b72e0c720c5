package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
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
			return withClient(c, func(s *client.Session) error {
				t := client.MachineTarget(machine)
				if out, ok := liveTerminal(c.OutOrStdout(), once || g.json); ok {
					return topLive(c.Context(), s, t, out, interval)
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
func topOnce(c *cobra.Command, s *client.Session, t rpc.Target) error {
	rows, failed, err := s.Top(c.Context(), t)
	return showPartial(c, map[string]any{"containers": rows, "machines": failed}, err, false, func(w io.Writer) error {
		render.Top(w, rows, 0)
		for _, f := range failed {
			fmt.Fprintf(c.ErrOrStderr(), "warning: machine %s did not answer: %s\n", f.Machine, f.Error)
		}
		return nil
	})
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

// topLive redraws the view on the alternate screen every interval until
// q, Ctrl-C or ctx ends, then restores the terminal.
func topLive(ctx context.Context, s *client.Session, t rpc.Target, out *os.File, every time.Duration) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	in := int(os.Stdin.Fd())
	old, err := term.MakeRaw(in) // q arrives without Enter; Ctrl-C arrives as a byte
	if err != nil {
		return fmt.Errorf("top: terminal: %w", err)
	}
	defer term.Restore(in, old)                   // best effort on the way out
	fmt.Fprint(out, "\x1b[?1049h\x1b[?25l")       // alternate screen, cursor hidden
	defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l") // restored
	go watchKeys(os.Stdin, quit)
	tick := time.NewTicker(every)
	defer tick.Stop()
	s.WatchTop(ctx, t, tick.C, topFetchTimeout, func(sample client.TopSample) {
		_, h, _ := term.GetSize(int(out.Fd()))
		// Raw mode turns off the terminal's \n → \r\n.
		fmt.Fprint(out, "\x1b[H\x1b[2J"+strings.ReplaceAll(render.TopFrame(sample, every, h), "\n", "\r\n"))
	})
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
