package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
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
	// reopen reopens a broken follow stream with backoff (the dashboard);
	// onStream, when set, hears a Machine's stream go down (err, and the
	// wait before the next attempt) and come back (nil).
	reopen   bool
	onStream func(machine string, err error, wait time.Duration)
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
			return withSession(c, func(s session) error {
				p, err := f.project.resolveProject(c.Context(), s.st, s.ctx)
				if err != nil {
					return err
				}
				q := rpc.LogQuery{Namespace: deploy.Namespace(p, f.project.env), Service: args[0], Deployment: f.deployment,
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

// parseWhen reads a --since/--until value: a duration back from now or
// an RFC 3339 time; empty is 0.
func parseWhen(flag, v string, now time.Time) (int64, error) {
	if v == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, fmt.Errorf("--%s %s: a duration back from now must be positive", flag, v)
		}
		return now.Add(-d).UnixNano(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: neither a duration (2h) nor an RFC 3339 time", flag, v)
	}
	return t.UnixNano(), nil
}

// historyRequest builds log_history's request from the flags.
func (f logsFlags) historyRequest(q rpc.LogQuery, now time.Time) (rpc.LogHistoryRequest, error) {
	since, err := parseWhen("since", f.since, now)
	if err != nil {
		return rpc.LogHistoryRequest{}, err
	}
	until, err := parseWhen("until", f.until, now)
	if err != nil {
		return rpc.LogHistoryRequest{}, err
	}
	if until != 0 && until < since {
		return rpc.LogHistoryRequest{}, fmt.Errorf("--until is before --since")
	}
	req := rpc.LogHistoryRequest{LogQuery: q, Since: since, Until: until, Limit: rpc.MaxLogLimit}
	switch tail := f.tail; {
	case tail > rpc.MaxLogLimit:
		return req, fmt.Errorf("--tail %d exceeds %d", tail, rpc.MaxLogLimit)
	case tail > 0:
		req.Limit, req.Newest = tail, true
	case tail < 0 && f.since == "":
		req.Limit, req.Newest = 100, true
	}
	return req, nil
}

func containerLabel(r rpc.LogRecord) string {
	if r.ContainerName != "" {
		return r.ContainerName
	}
	if len(r.ContainerID) > 12 {
		return r.ContainerID[:12]
	}
	return r.ContainerID
}

func printLine(w io.Writer, l observe.Line, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(l)
		return
	}
	fmt.Fprintf(w, "%s %s %s | %s\n", l.Machine, containerLabel(l.LogRecord),
		time.Unix(0, l.Time).UTC().Format("15:04:05.000"), l.Text)
}

// printServiceLogs asks every Machine (or --machine) for its stored lines
// and prints them merged by time; a Machine without a Log Store is named
// with the capability it lacks (observe.History).
func printServiceLogs(c *cobra.Command, s session, f logsFlags, q rpc.LogQuery) error {
	req, err := f.historyRequest(q, time.Now())
	if err != nil {
		return err
	}
	t := rpc.Target{All: true}
	if f.machine != "" {
		t = rpc.Target{Set: []string{f.machine}}
	}
	logs, err := observe.History(c.Context(), s.ent, t, req)
	if err != nil {
		return err
	}
	if g.json {
		if err := printJSON(c.OutOrStdout(), logs); err != nil {
			return err
		}
	} else {
		for _, l := range logs.Lines {
			printLine(c.OutOrStdout(), l, false)
		}
		printLogsWarnings(c.ErrOrStderr(), logs)
	}
	if partial := logs.Partial(); len(partial) > 0 {
		return &exitError{code: 3, err: fmt.Errorf("logs are partial: %s", strings.Join(partial, ", "))}
	}
	return nil
}

func printLogsWarnings(w io.Writer, logs observe.Logs) {
	for _, n := range logs.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, m := range logs.Failed {
		fmt.Fprintf(w, "warning: machine %s did not answer: %s\n", m.Machine, m.Error)
	}
}

// followServiceLogs opens tail_logs on every Machine and prints lines as
// they are stored, until Ctrl-C; a Machine whose stream cannot open or
// breaks is named. With f.reopen set (the dashboard) a broken stream is
// reopened with backoff instead, and f.onStream hears it go down and up.
func followServiceLogs(c *cobra.Command, s session, f logsFlags, q rpc.LogQuery) error {
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var list rpc.MachineList
	if err := s.ent.Call(ctx, rpc.Target{}, rpc.CmdListMachines, nil, &list); err != nil {
		return fmt.Errorf("logs: list machines: %w", err)
	}
	tail := f.tail
	if tail < 0 {
		tail = 10
	}
	if tail > rpc.MaxLogLimit {
		return fmt.Errorf("--tail %d exceeds %d", tail, rpc.MaxLogLimit)
	}
	lf := &logFollower{c: c, s: s, f: f, q: q, tail: tail}
	var wg sync.WaitGroup
	matched := 0
	for _, m := range list.Machines {
		if f.machine != "" && f.machine != m.Name && f.machine != m.ID && !(len(f.machine) >= 4 && strings.HasPrefix(m.ID, f.machine)) {
			continue
		}
		matched++
		name := m.Name
		if name == "" {
			name = m.ID
		}
		wg.Go(func() { lf.follow(ctx, m.ID, name) })
	}
	if matched == 0 && f.machine != "" {
		return fmt.Errorf("--machine %s: no such Machine", f.machine)
	}
	wg.Wait()
	if len(lf.broken) > 0 && ctx.Err() == nil {
		return &exitError{code: 3, err: fmt.Errorf("logs could not be followed on %s", strings.Join(lf.broken, ", "))}
	}
	return nil
}

// Reopen backoff of a broken log stream: doubling from the first, capped.
// A reopened stream asks for the last logReopenTail lines and prints
// those newer than the last it printed.
const (
	logReopenFirst = time.Second
	logReopenMax   = 30 * time.Second
	logReopenTail  = 500
)

// logFollower follows one Service's logs on each Machine, one goroutine
// per Machine.
type logFollower struct {
	c      *cobra.Command
	s      session
	f      logsFlags
	q      rpc.LogQuery
	tail   int
	mu     sync.Mutex // output and broken
	broken []string
}

// follow streams one Machine's lines; with reopen it opens the stream
// again after a break, asking for recent lines and printing only those
// newer than the last one printed.
func (lf *logFollower) follow(ctx context.Context, id, name string) {
	var last int64
	wait := logReopenFirst
	for attempt := 1; ; attempt++ {
		began := time.Now()
		opened, err := lf.stream(ctx, id, name, &last, attempt > 1)
		if ctx.Err() != nil {
			return
		}
		if opened && time.Since(began) > logReopenMax {
			wait = logReopenFirst // it worked for a while: start the backoff over
		}
		if !lf.f.reopen {
			lf.fail(name, err)
			return
		}
		lf.down(name, err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, logReopenMax)
	}
}

// stream runs one tail_logs stream until it ends; opened says whether it
// opened, err why it ended.
func (lf *logFollower) stream(ctx context.Context, id, name string, last *int64, again bool) (bool, error) {
	tail := lf.tail
	if again {
		tail = logReopenTail // what was stored while the stream was down, deduplicated below
	}
	st, err := lf.s.ent.OpenStream(ctx, rpc.Target{One: id}, rpc.CmdTailLogs, rpc.TailLogsRequest{LogQuery: lf.q, Tail: tail, Follow: true})
	if err != nil {
		return false, err
	}
	defer st.Close()
	if again && lf.f.onStream != nil {
		lf.f.onStream(name, nil, 0)
	}
	for {
		fr, err := st.Recv()
		if err != nil {
			return true, fmt.Errorf("log stream ended: %w", err)
		}
		if fr.Done {
			return true, errors.New("log stream ended")
		}
		var r rpc.LogRecord
		if json.Unmarshal(fr.Event, &r) != nil || again && r.Time <= *last {
			continue
		}
		*last = max(*last, r.Time)
		lf.mu.Lock()
		printLine(lf.c.OutOrStdout(), observe.Line{Machine: name, LogRecord: r}, g.json)
		lf.mu.Unlock()
	}
}

func (lf *logFollower) fail(machine string, err error) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	lf.broken = append(lf.broken, machine)
	fmt.Fprintf(lf.c.ErrOrStderr(), "warning: machine %s: %v\n", machine, err)
}

// down names a Machine whose stream is down until its reopen in wait.
func (lf *logFollower) down(machine string, err error, wait time.Duration) {
	if lf.f.onStream != nil {
		lf.f.onStream(machine, err, wait)
		return
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	fmt.Fprintf(lf.c.ErrOrStderr(), "warning: machine %s: %v; reopening in %s\n", machine, err, wait)
}
