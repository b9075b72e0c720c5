package deploy

import "testing"

func TestExecutionStatus(t *testing.T) {
	for _, tc := range []struct {
		desired, running, ready int
		complete                bool
		want                    string
	}{
		{3, 0, 0, true, "stopped"},
		{0, 0, 0, true, "stopped"},
		{3, 3, 3, true, "ready"},
		{3, 3, 3, false, "ready"}, // enough ready: unobserved Machines change nothing
		{3, 4, 4, true, "ready"},
		{3, 3, 2, true, "degraded"},
		{3, 3, 0, true, "not ready"},
		{3, 0, 0, false, "unknown"},
		{3, 2, 2, false, "unknown"},
		{0, 1, 1, true, "degraded"}, // running though none is desired
	} {
		if got := ExecutionStatus(tc.desired, tc.running, tc.ready, tc.complete); got != tc.want {
			t.Errorf("ExecutionStatus(desired %d, running %d, ready %d, complete %v) = %q, want %q",
				tc.desired, tc.running, tc.ready, tc.complete, got, tc.want)
		}
	}
}

func TestOutcomeFailedRows(t *testing.T) {
	o := Outcome{Steps: []Step{
		{Row: 0, Status: StepCompleted}, {Row: 0, Status: StepCompleted},
		{Row: 1, Status: StepFailed}, {Row: 1, Status: StepNeverAttempted},
		{Row: 2, Status: StepCompleted}, {Row: 2, Status: StepCompleted, Compensation: true},
		{Row: 3, Status: StepNeverAttempted},
	}}
	if got := o.FailedRows(); got != 2 {
		t.Fatalf("FailedRows = %d, want 2 (rows 1 and 3)", got)
	}
	if got := (Outcome{}).FailedRows(); got != 0 {
		t.Fatalf("empty outcome: %d", got)
	}
}
