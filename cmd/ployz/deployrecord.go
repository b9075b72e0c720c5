package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// deployRecordEvery is how often a running Deploy's record is rewritten
// when steps changed it; heartbeatEvery when nothing did (well inside
// deploy.StaleAfter, so a reader can tell a dead CLI from a slow step).
const (
	deployRecordEvery = 500 * time.Millisecond
	heartbeatEvery    = 5 * time.Second
)

// deployRecord writes a running Deploy's record to the operator store
// as it goes, so `ployz deploy ls` and the dashboard (other processes on
// this computer) see its progress live and its per-Machine outcome after.
// A failed write warns once and never fails the Deploy.
type deployRecord struct {
	st     *operator.Store
	ctx    string
	rec    *deploy.Recorder
	errw   io.Writer
	warned bool
	stop   chan struct{}
	done   chan struct{}
}

func recordDeploy(st *operator.Store, ctxName string, p deploy.Plan, why string, errw io.Writer) *deployRecord {
	d := &deployRecord{st: st, ctx: ctxName, rec: deploy.NewRecorder(p, why, time.Now()), errw: errw, stop: make(chan struct{}), done: make(chan struct{})}
	d.write(true)
	go d.loop()
	return d
}

func (d *deployRecord) loop() {
	defer close(d.done)
	t := time.NewTicker(deployRecordEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if d.write(time.Since(last) >= heartbeatEvery) {
				last = time.Now()
			}
		}
	}
}

// write stores the record when it changed (or always); it reports
// whether it wrote.
func (d *deployRecord) write(always bool) bool {
	rec, changed := d.rec.Take(time.Now())
	if !changed && !always {
		return false
	}
	body, err := json.Marshal(rec)
	if err == nil {
		err = d.st.SaveDeploy(operator.DeployRow{Context: d.ctx, DeploymentID: rec.DeploymentID, Namespace: rec.Namespace,
			StartedAt: rec.StartedAt, UpdatedAt: rec.UpdatedAt, Body: body})
	}
	if err != nil && !d.warned {
		d.warned = true
		fmt.Fprintf(d.errw, "warning: this deploy's record is not saved (ployz deploy ls and the dashboard will not show it): %v\n", err)
	}
	return true
}

// finish records the Outcome and writes the final record.
func (d *deployRecord) finish(o deploy.Outcome) {
	close(d.stop)
	<-d.done
	d.rec.Finish(o, time.Now())
	d.write(true)
}

// both is a Progress that tells two listeners.
func both(a, b func(deploy.Event)) func(deploy.Event) {
	return func(e deploy.Event) { a(e); b(e) }
}

// deployRecords reads a context's newest Deploy records; a body this
// version cannot read is skipped with its id in skipped.
func deployRecords(st *operator.Store, ctxName string, limit int) (recs []deploy.Record, skipped []string, err error) {
	rows, err := st.Deploys(ctxName, limit)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	for _, r := range rows {
		rec, err := deploy.ParseRecord(r.Body, now)
		if err != nil {
			skipped = append(skipped, r.DeploymentID)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, skipped, nil
}

// deployLsResult is `ployz deploy ls --json`.
type deployLsResult struct {
	Deploys      []deploy.Record      `json:"deploys"`
	LastOutcomes []deploy.LastOutcome `json:"last_outcomes"`
	Unreadable   []string             `json:"unreadable,omitempty"`
}

func deployLsCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the Deploys this computer ran in the current context: live progress and each Machine's outcome",
		Long: `List the Deploys run from this computer (its operator store) in the current
context, newest first: a running one with the steps in flight on each Machine,
a finished one with each Machine's outcome (completed, failed or never
attempted). This is the operator's record, not an observation of the Cluster:
` + "`ployz ps`" + ` shows what the Machines run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if limit < 1 {
				return fmt.Errorf("--limit: must be at least 1, got %d", limit)
			}
			return withCurrentContext(func(st *operator.Store, ctxName string) error {
				recs, skipped, err := deployRecords(st, ctxName, limit)
				if err != nil {
					return err
				}
				res := deployLsResult{Deploys: recs, LastOutcomes: deploy.LastOutcomes(recs), Unreadable: skipped}
				if res.Deploys == nil {
					res.Deploys = []deploy.Record{}
				}
				if g.json {
					return printJSON(c.OutOrStdout(), res)
				}
				printDeploys(c.OutOrStdout(), res)
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many Deploys to list")
	return cmd
}

// withCurrentContext runs f with the operator store and the name of its
// current context: the operator's own records, no Machine asked.
func withCurrentContext(f func(st *operator.Store, ctxName string) error) error {
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	oc, err := operator.Resolve(st, "")
	if err != nil {
		return err
	}
	return f(st, oc.Name)
}

func printDeploys(w io.Writer, res deployLsResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPLOYMENT\tNAMESPACE\tREVISION\tSTATUS\tSTARTED\tMACHINES")
	for _, r := range res.Deploys {
		status := r.Status
		if r.Stale {
			status += " (no word from its CLI since " + r.UpdatedAt.Local().Format(time.TimeOnly) + ")"
		}
		var ms []string
		for _, m := range r.Machines {
			s := m.Machine + " " + m.Status
			if len(m.InFlight) > 0 {
				s += ": " + strings.Join(m.InFlight, ", ")
			}
			ms = append(ms, s)
		}
		sort.Strings(ms)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.DeploymentID, r.Namespace, r.Revision, status, r.StartedAt.Local().Format(time.DateTime), strings.Join(ms, "; "))
	}
	tw.Flush()
	for _, id := range res.Unreadable {
		fmt.Fprintf(w, "warning: the record of deploy %s is unreadable by this version\n", id)
	}
}
