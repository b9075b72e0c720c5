package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// logsFlags are `ployz logs` options.
type logsFlags struct {
	project    projectFlags
	since      string
	until      string
	machine    string
	container  string
	deployment string
	grep       string
	follow     bool
	tail       int
}

func logsCommand() *cobra.Command {
	var f logsFlags
	cmd := &cobra.Command{
		Use:   "logs SERVICE",
		Short: "Print a Service's output from every Machine, merged by time, removed Containers included",
		Long: `Print a Service's Container output from each Machine's Log Store, merged by
time and prefixed with Machine and Container. Output of Containers that were
since replaced or removed is included. A Machine that cannot answer is named
on stderr and the command exits 3; none is skipped silently.

--since and --until take a duration back from now (2h, 30m) or an RFC 3339
time. Without --since the last --tail lines (default 100) are printed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				ns, err := f.project.namespace(c.Context(), s)
				if err != nil {
					return err
				}
				q := rpc.LogQuery{Namespace: ns, Service: args[0], Deployment: f.deployment,
					Container: f.container, Grep: f.grep}
				if f.follow {
					return followServiceLogs(c, s, f, q)
				}
				return printServiceLogs(c, s, f, q)
			})
		},
	}
	f.project.add(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&f.since, "since", "", "only lines after this: a duration back from now (2h) or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "only lines before this: a duration back from now or an RFC 3339 time")
	fl.StringVar(&f.machine, "machine", "", "only this Machine (name or id)")
	fl.StringVar(&f.container, "container", "", "only this Container (name or id prefix)")
	fl.StringVar(&f.deployment, "deployment", "", "only Containers of this Deployment (id or prefix)")
	fl.StringVar(&f.grep, "grep", "", "only lines matching this regular expression (RE2)")
	fl.BoolVarP(&f.follow, "follow", "f", false, "keep printing new lines until interrupted")
	fl.IntVar(&f.tail, "tail", -1, "print only the last N lines (default 100 without --since, all with it)")
	return cmd
}

func printLine(w io.Writer, l observe.Line, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(l)
		return
	}
	// A Container's output is not the operator's: its escape sequences
	// are shown, not run (--json keeps the raw text, JSON-escaped).
	_, _ = io.WriteString(w, render.LogLine(l.Machine, l.LogRecord))
}

// printServiceLogs asks every Machine (or --machine) for its stored lines
// and prints them merged by time; a Machine without a Log Store is named
// with the capability it lacks (observe.History).
func printServiceLogs(c *cobra.Command, s *client.Session, f logsFlags, q rpc.LogQuery) error {
	req, err := client.LogWindow{Since: f.since, Until: f.until, Tail: f.tail}.Request(q, time.Now())
	if err != nil {
		return err
	}
	logs, err := s.LogHistory(c.Context(), client.MachineTarget(f.machine), req)
	return showPartial(c, logs, err, false, func(w io.Writer) error {
		for _, l := range logs.Lines {
			printLine(w, l, false)
		}
		render.LogsWarnings(c.ErrOrStderr(), logs)
		return nil
	})
}

// followServiceLogs prints a Service's lines on every Machine as they
// are stored, until Ctrl-C; a Machine whose stream cannot open or breaks
// is named, and the command exits 3.
func followServiceLogs(c *cobra.Command, s *client.Session, f logsFlags, q rpc.LogQuery) error {
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := s.FollowLogs(ctx, client.LogFollow{Query: q, Machine: f.machine, Tail: f.tail}, func(e client.LogEvent) {
		if e.Line != nil {
			printLine(c.OutOrStdout(), *e.Line, g.json)
			return
		}
		if e.Err != nil {
			fmt.Fprintf(c.ErrOrStderr(), "warning: machine %s: %s\n", e.Machine, render.Terminal(e.Err.Error()))
		}
	})
	return exitFor(err, false)
}
