package deploy

import (
	"context"
	"fmt"
	"sync"
)

// DefaultParallelism bounds how many Machines one phase of a Service acts
// on at once.
const DefaultParallelism = 8

// runState is what the Services of one execution share: the outcome's
// status and, by Service, why its remaining rows are skipped.
type runState struct {
	mu     sync.Mutex
	status string
	failed map[string]string // service -> why its later rows are skipped
}

func newRunState() *runState { return &runState{status: "completed", failed: map[string]string{}} }

// skipReason says why row r cannot run now, or "".
func (rs *runState) skipReason(ctx context.Context, p Plan, r Row) string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := ctx.Err(); err != nil {
		rs.status = "cancelled"
		return "cancelled before it ran"
	}
	if why, ok := rs.failed[r.Service]; ok {
		return why
	}
	if dep := failedDependency(p, r.Service, rs.failed); dep != "" {
		return fmt.Sprintf("skipped: service %q it depends on failed", dep)
	}
	return ""
}

// fail marks r's Service failed: its later rows and its dependents skip.
func (rs *runState) fail(r Row) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.status == "completed" {
		rs.status = "partial"
	}
	if _, ok := rs.failed[r.Service]; !ok {
		rs.failed[r.Service] = fmt.Sprintf("skipped: an earlier step of service %q failed on %s", r.Service, r.Machine)
	}
}

// partial marks the execution partial (unless it was cancelled).
func (rs *runState) partial() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.status == "completed" {
		rs.status = "partial"
	}
}

// serviceRun is one Service's part of an execution; its steps are kept in
// plan order whatever order its Machines finished in.
type serviceRun struct {
	e     *Executor
	p     Plan
	g     serviceGroup
	rs    *runState
	steps []Step
}

func (sr *serviceRun) add(s ...Step) { sr.steps = append(sr.steps, s...) }

// forRows runs fn for each of rows, the rows of one Machine one after the
// other in plan order and different Machines at once (at most the
// Executor's parallelism), then records their steps in plan order.
func (sr *serviceRun) forRows(rows []int, fn func(i int) []Step) {
	byMachine := map[string][]int{}
	var order []string
	for _, i := range rows {
		m := sr.p.Rows[i].MachineID
		if _, ok := byMachine[m]; !ok {
			order = append(order, m)
		}
		byMachine[m] = append(byMachine[m], i)
	}
	results := make(map[int][]Step, len(rows))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, sr.e.parallelism())
	for _, m := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func(idx []int) {
			defer wg.Done()
			defer func() { <-sem }()
			for _, i := range idx {
				s := fn(i)
				mu.Lock()
				results[i] = s
				mu.Unlock()
			}
		}(byMachine[m])
	}
	wg.Wait()
	for _, i := range rows {
		sr.add(results[i]...)
	}
}

func (e *Executor) parallelism() int {
	if e.Parallelism > 0 {
		return e.Parallelism
	}
	return DefaultParallelism
}

// runServices runs every Service, each once the Services it depends on
// (within this plan) have finished, independent ones at once, and returns
// their steps in plan order.
func (e *Executor) runServices(ctx context.Context, p Plan, rs *runState) []Step {
	groups := serviceGroups(p.Rows)
	done := map[string]chan struct{}{}
	for _, g := range groups {
		done[g.service] = make(chan struct{})
	}
	deps := map[string][]string{}
	for _, s := range p.Services {
		deps[s.Name] = s.DependsOn
	}
	pos := map[string]int{}
	for k, g := range groups {
		pos[g.service] = k
	}
	runs := make([]*serviceRun, len(groups))
	var wg sync.WaitGroup
	for k, g := range groups {
		runs[k] = &serviceRun{e: e, p: p, g: g, rs: rs}
		wg.Add(1)
		go func(sr *serviceRun) {
			defer wg.Done()
			defer close(done[sr.g.service])
			// Only earlier Services are waited for: the plan lists
			// dependencies first, and a cycle must not deadlock.
			for _, d := range deps[sr.g.service] {
				if k, ok := pos[d]; ok && k < pos[sr.g.service] {
					<-done[d]
				}
			}
			sr.run(ctx)
		}(runs[k])
	}
	wg.Wait()
	var steps []Step
	for _, sr := range runs {
		steps = append(steps, sr.steps...)
	}
	return steps
}
