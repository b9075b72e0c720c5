package render

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/client"
)

// Jobs renders the scheduled jobs, each followed by its newest runs.
func Jobs(w io.Writer, jobs []client.Job, now time.Time) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no scheduled jobs")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tJOB\tSCHEDULE\tCONCURRENCY\tNEXT\tIMAGE")
	for _, j := range jobs {
		sched := j.Schedule
		if j.Timezone != "" {
			sched += " (" + j.Timezone + ")"
		}
		next := "-"
		if j.Next != nil {
			next = j.Next.Format(time.RFC3339) + " (in " + j.Next.Sub(now).Round(time.Second).String() + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Namespace, j.Service, sched, j.Concurrency, next, cmp.Or(j.Image, "-"))
		if len(j.Runs) == 0 {
			fmt.Fprintln(tw, "\t  no runs yet\t\t\t\t")
		}
		for _, r := range j.Runs {
			fmt.Fprintf(tw, "\t  %s\t%s\t%s\t%s\t%s\n", r.Tick.Format(time.RFC3339), JobRunOutcome(r), cmp.Or(r.Duration, "-"), cmp.Or(r.Machine, "-"), cmp.Or(r.Container, r.Error, "-"))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return jobLogsHint(w, jobs)
}

// jobLogsHint names the command printing a run's output, with the
// newest run that has a Container as the example.
func jobLogsHint(w io.Writer, jobs []client.Job) error {
	for _, j := range jobs {
		for _, r := range j.Runs {
			if r.Container != "" {
				_, err := fmt.Fprintf(w, "\na run's output: ployz logs %s --container %s (with the -p/--env of %s)\n", j.Service, r.Container, j.Namespace)
				return err
			}
		}
	}
	return nil
}

// JobRunOutcome is a run's status with its exit code: "failed (exit 3)".
func JobRunOutcome(r client.JobRunRecord) string {
	if r.ExitCode != nil {
		return fmt.Sprintf("%s (exit %d)", r.Status, *r.ExitCode)
	}
	return r.Status
}

// FailedJobs says, one line each, which jobs' last run failed (ployz
// ps shows it under the Containers).
func FailedJobs(w io.Writer, jobs []client.Job) {
	for _, j := range client.FailedJobs(jobs) {
		r := j.Runs[0]
		why := JobRunOutcome(r)
		if r.Error != "" && r.ExitCode == nil {
			why += ": " + r.Error
		}
		fmt.Fprintf(w, "job %s/%s: last run %s at %s%s (`ployz jobs ls`)\n", j.Namespace, j.Service, why,
			r.Tick.Format(time.RFC3339), strings.TrimSuffix(" on "+r.Machine, " on "))
	}
}
