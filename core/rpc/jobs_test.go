package rpc

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/ployz/ployz/core/jobs"
)

// TestJobPayloadsFixture pins put_jobs and list_jobs: each field reads
// from its JSON name, a later field is ignored, and re-encoding writes
// the keys the fixture holds.
func TestJobPayloadsFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/jobs.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Put     PutJobsRequest  `json:"put_jobs"`
		Put2    JobsPut         `json:"jobs_put"`
		List    ListJobsRequest `json:"list_jobs"`
		JobList JobList         `json:"job_list"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := doc.Put.Validate(); err != nil {
		t.Fatal(err)
	}
	j := doc.Put.Jobs[0]
	if !doc.Put.Prune || j.Schedule.Timezone != "Europe/Paris" || j.Spec.Kind != KindRun || string(j.Files["sha256:ab"]) != "hello" {
		t.Fatalf("put_jobs: %+v", doc.Put)
	}
	if r := doc.JobList.Jobs[0].Runs[0]; r.ExitCode == nil || *r.ExitCode != 3 || r.DurationMS != 5000 || r.Machine != "m1id" {
		t.Fatalf("list_jobs run: %+v", r)
	}
	reencodes(t, b, map[string]any{"put_jobs": doc.Put, "jobs_put": doc.Put2, "list_jobs": doc.List, "job_list": doc.JobList})
}

// TestPutJobsValidate: a bad schedule, a spec of another kind or no
// image are refused naming the field.
func TestPutJobsValidate(t *testing.T) {
	ok := JobDecl{Service: "report", Schedule: jobs.Schedule{Cron: "@daily", Concurrency: "forbid"}, Spec: ContainerSpec{Kind: KindRun, Image: "x"}}
	for field, mod := range map[string]func(*JobDecl){
		"jobs[].schedule":   func(j *JobDecl) { j.Schedule.Cron = "nope" },
		"jobs[].spec.kind":  func(j *JobDecl) { j.Spec.Kind = KindService },
		"jobs[].spec.image": func(j *JobDecl) { j.Spec.Image = "" },
		"jobs[].service":    func(j *JobDecl) { j.Service = "" },
	} {
		j := ok
		mod(&j)
		err := PutJobsRequest{Namespace: "shop-prod", Jobs: []JobDecl{j}}.Validate()
		if e, is := err.(*Error); !is || e.Details["field"] != field {
			t.Errorf("%s: err = %v", field, err)
		}
	}
}
