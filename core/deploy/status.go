package deploy

// ExecutionStatus is a Service's execution verdict from its Containers:
// stopped (nothing running, every Machine observed), ready (every desired
// Container ready), unknown (some Machine unobserved and not enough
// ready), degraded (some ready), or not ready (running, none ready).
// complete says every participating Machine was observed.
func ExecutionStatus(desired, running, ready int, complete bool) string {
	switch {
	case running == 0 && complete:
		return "stopped"
	case ready >= desired && desired > 0:
		return "ready"
	case !complete:
		return "unknown"
	case ready > 0:
		return "degraded"
	default:
		return "not ready"
	}
}

// FailedRows counts the plan rows with a step that did not complete
// (failed, never attempted or compensated), each row once.
func (o Outcome) FailedRows() int {
	rows := map[int]bool{}
	for _, s := range o.Steps {
		if s.Status != StepCompleted {
			rows[s.Row] = true
		}
	}
	return len(rows)
}
