package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// TestCLIJobs: jobs ls shows each job's schedule and newest runs with
// exit codes and durations (--json too), and ps names a job whose last
// run failed.
func TestCLIJobs(t *testing.T) {
	fc := cliCluster(t)
	three, zero := 3, 0
	fc.Lock()
	fc.Jobs["shop-production/report"] = rpc.JobDecl{Service: "report", Schedule: jobs.Schedule{Cron: "*/5 * * * *", Concurrency: "forbid"},
		Spec: rpc.ContainerSpec{Image: "shop/report:1", Kind: rpc.KindRun}}
	fc.JobRuns["shop-production/report"] = []store.JobRunBody{
		{Job: "shop-production/report", Tick: 1772366700000, Status: store.JobRunFailed, MachineName: "m2", Container: "shop-production-report-job-ab12",
			Started: 1772366700100, Ended: 1772366705100, ExitCode: &three, DurationMS: 5000, Error: "exit code 3"},
		{Job: "shop-production/report", Tick: 1772366400000, Status: store.JobRunSucceeded, MachineName: "m1", ExitCode: &zero, DurationMS: 1200},
		{Job: "shop-production/report", Tick: 1772366100000, Status: store.JobRunMissed, Error: "not started within 2m0s of its tick"},
	}
	fc.Unlock()
	out, errs, code := cli(t, fc, "jobs", "ls", "-p", "shop")
	for _, want := range []string{"report", "*/5 * * * *", "failed (exit 3)", "5s", "m2", "succeeded (exit 0)", "1.2s", "missed", "not started within",
		"a run's output: ployz logs report --container shop-production-report-job-ab12 (with the -p/--env of shop-production)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("jobs ls: exit %d, want %q in\n%s\n%s", code, want, out, errs)
		}
	}
	out, _, code = cli(t, fc, "jobs", "ls", "-p", "shop", "--json")
	var doc struct {
		Jobs []struct {
			Service string
			Next    string
			Runs    []struct {
				Status   string
				ExitCode *int `json:"exit_code"`
				Duration string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc.Jobs) != 1 || len(doc.Jobs[0].Runs) != 3 ||
		doc.Jobs[0].Runs[0].ExitCode == nil || *doc.Jobs[0].Runs[0].ExitCode != 3 || doc.Jobs[0].Runs[0].Duration != "5s" {
		t.Fatalf("jobs ls --json: exit %d, %v\n%s", code, err, out)
	}
	out, _, code = cli(t, fc, "ps", "-p", "shop")
	if code != 0 || !strings.Contains(out, "job shop-production/report: last run failed (exit 3)") || !strings.Contains(out, "on m2") {
		t.Fatalf("ps does not show the failed job run: exit %d\n%s", code, out)
	}
}
