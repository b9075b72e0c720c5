package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// scheduledCompose is a job every minute beside a global Service of the
// same image, so every Machine holds the image (a job's run pulls only
// without credentials, and this image is in no registry).
const scheduledCompose = `name: cron
services:
  web:
    image: %[1]s
    x-placement: {mode: global}
  tick:
    image: %[1]s
    command: ["--exit-code", "0", "--say", "%[2]s"] # the image's entrypoint is /testapp
    x-schedule: "* * * * *"
`

// jobsDoc is `ployz jobs ls --json`.
type jobsDoc struct {
	Jobs []struct {
		Service string `json:"service"`
		Runs    []struct {
			Tick      time.Time `json:"tick"`
			Status    string    `json:"status"`
			Machine   string    `json:"machine"`
			Container string    `json:"container"`
			ExitCode  *int      `json:"exit_code"`
		} `json:"runs"`
	} `json:"jobs"`
}

// TestScheduledJobOncePerTick: a job every minute on three eligible
// Machines runs exactly once per tick Cluster-wide (issue 50 item 2):
// over two and a half minutes each tick has one run, succeeded with exit code 0,
// and the Log Store holds one line of the job's marker per tick.
func TestScheduledJobOncePerTick(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	formCluster(t, l, op)
	marker := fmt.Sprintf("tick-marker-%d", time.Now().UnixNano())
	if doc, errs, code := deployFile(t, op, fmt.Sprintf(scheduledCompose, lab.TestAppRef(), marker)); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	// The job is no long-running Service: besides web's 3 Containers,
	// only a run of a tick may be there (the deploy can end on a tick).
	p := ps(t, op, "cron")
	web := 0
	for _, c := range p.Containers {
		switch {
		case c.Service == "web":
			web++
		case !strings.HasPrefix(c.Name, "cron-production-tick-job-"):
			t.Fatalf("Container %s of %s: want web's and the job's runs only", c.Name, c.Service)
		}
	}
	if web != 3 {
		t.Fatalf("%d web Containers in %d, want 3", web, len(p.Containers))
	}
	deployed := time.Now()
	time.Sleep(2*time.Minute + 30*time.Second)
	var doc jobsDoc
	op.json(t, &doc, "jobs", "ls", "-p", "cron", "--runs", "20")
	if len(doc.Jobs) != 1 || doc.Jobs[0].Service != "tick" {
		t.Fatalf("jobs ls: %+v", doc.Jobs)
	}
	seen := map[time.Time]bool{}
	for _, r := range doc.Jobs[0].Runs {
		if seen[r.Tick] {
			t.Errorf("tick %v has two rows", r.Tick)
		}
		seen[r.Tick] = true
		if r.Tick.Before(deployed) {
			continue
		}
		if r.Status != "succeeded" || r.ExitCode == nil || *r.ExitCode != 0 || r.Machine == "" || !strings.HasPrefix(r.Container, "cron-production-tick-job-") {
			t.Errorf("run at %v: %+v", r.Tick, r)
		}
	}
	ticks, succeeded := 0, 0
	for _, r := range doc.Jobs[0].Runs {
		if !r.Tick.Before(deployed) {
			ticks++
		}
		if r.Status == "succeeded" {
			succeeded++
		}
	}
	if ticks < 2 || ticks > 3 {
		t.Fatalf("%d ticks recorded in 2.5 minutes, want 2 or 3: %+v", ticks, doc.Jobs[0].Runs)
	}
	var logs logsDoc
	op.json(t, &logs, "logs", "tick", "-p", "cron", "--since", "10m", "--grep", marker)
	if len(logs.Lines) != succeeded {
		t.Errorf("the Log Store holds %d lines of the job's output, want one per run (%d): %+v (failed %+v)", len(logs.Lines), succeeded, logs.Lines, logs.Failed)
	}
}
