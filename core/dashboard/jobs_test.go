package dashboard

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// TestJobsView: the Jobs page carries each job's schedule, next tick and
// newest runs (status, exit code, duration) with failures marked, and a
// job whose newest run failed as failing.
func TestJobsView(t *testing.T) {
	_, ts := serve(t, newFake(), time.Second)
	var j Jobs
	if code := getJSON(t, ts.Client(), ts.URL+"/api/view/jobs", &j); code != 200 || len(j.Jobs) != 2 {
		t.Fatalf("jobs %d %+v", code, j)
	}
	report, sweep := j.Jobs[0], j.Jobs[1]
	if report.Service != "report" || report.Cron != "*/5 * * * *" || report.Next == 0 || !report.Failing || len(report.Runs) != 2 {
		t.Fatalf("report %+v", report)
	}
	if r := report.Runs[0]; !r.Failed || r.ExitCode == nil || *r.ExitCode != 3 || r.DurationMS != 4000 || r.Container == "" {
		t.Errorf("failed run %+v", r)
	}
	if r := report.Runs[1]; r.Failed || r.Status != store.JobRunSucceeded {
		t.Errorf("succeeded run %+v", r)
	}
	if sweep.Failing || sweep.Runs == nil || sweep.Timezone != "Europe/Berlin" {
		t.Errorf("sweep %+v", sweep)
	}
}

// TestJobsPageMarks: lost and missed are failures too, skipped is not;
// only the newest run decides whether the job is failing.
func TestJobsPageMarks(t *testing.T) {
	p := JobsPage(rpc.JobList{Jobs: []rpc.JobView{{Service: "a", Runs: []store.JobRunBody{
		{Status: store.JobRunSkipped}, {Status: store.JobRunLost}, {Status: store.JobRunMissed}}}}})
	j := p.Jobs[0]
	if j.Failing || j.Runs[0].Failed || !j.Runs[1].Failed || !j.Runs[2].Failed {
		t.Fatalf("page %+v", p)
	}
	if len(JobsPage(rpc.JobList{}).Jobs) != 0 || JobsPage(rpc.JobList{}).Jobs == nil {
		t.Fatal("no jobs, want an empty list")
	}
}
