package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// fanoutApp is services Services of replicas replicas each.
func fanoutApp(services, replicas int) App {
	a := app()
	for i := 0; i < services; i++ {
		a.Services = append(a.Services, svc(fmt.Sprintf("svc%03d", i), replicas))
	}
	return a
}

// fanoutSnapshot is n observed Machines named as newFanoutFleet names them.
func fanoutSnapshot(n int) Snapshot {
	ms := make([]MachineState, n)
	for i := range ms {
		ms[i] = MachineState{ID: fmt.Sprintf("id-m%03d", i), Name: fmt.Sprintf("m%03d", i), Observed: true, ImagesKnown: true,
			Images: []string{"ployz-testapp:latest"}, Capabilities: []string{rpc.CapContainerHost}}
	}
	return Snapshot{Machines: ms}
}

// TestExecutorFanoutBounded: one Service of 12 replicas on 12 simulated
// Machines (through the entry's real forwarding over mutual TLS) runs at
// most Parallelism Machines at once, yet more than one, and every row's
// every step is reported completed.
func TestExecutorFanoutBounded(t *testing.T) {
	lat := fanoutLatency{rtt: 2 * time.Millisecond, docker: map[string]time.Duration{
		rpc.CmdCreateContainer: 20 * time.Millisecond, rpc.CmdStartContainer: 20 * time.Millisecond, rpc.CmdWaitReady: 20 * time.Millisecond}}
	fl := newFanoutFleet(t, 12, lat)
	p, err := MakePlan(fanoutApp(1, 12), fanoutSnapshot(12), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := (&Executor{C: fl.entry, Parallelism: 3}).Run(context.Background(), p)
	if o.Status != "completed" {
		t.Fatalf("status %s (%s); first failure: %s", o.Status, statuses(o), firstFailure(o))
	}
	if peak := fl.all.peak.Load(); peak > 3 || peak < 2 {
		t.Errorf("peak calls in flight = %d, want 2..3 (Parallelism 3)", peak)
	}
	byRow := stepsByRow(o)
	for i, r := range p.Rows {
		if got := len(byRow[i]); got != 3 {
			t.Errorf("row %d (%s on %s) reported %d steps, want create, start, wait_ready", i, r.NewName, r.Machine, got)
		}
	}
	for _, m := range fl.machines {
		if len(m.created) != 1 {
			t.Errorf("Machine %s created %d Containers, want 1", m.name, len(m.created))
		}
	}
}

// TestExecutorFanoutPartialFailure: 4 Services × 6 replicas on 6
// simulated Machines, two of which refuse every create; a Service's 6
// Machines start at once (Parallelism 6), so each refusal is met. Every row is
// reported, Machine by Machine: a failure only on the refusing Machines
// and carrying their error, never a completed create there, and each
// Service's rows either completed, failed there, or never attempted with
// the reason naming the failed Machine.
func TestExecutorFanoutPartialFailure(t *testing.T) {
	lat := fanoutLatency{rtt: time.Millisecond, docker: map[string]time.Duration{rpc.CmdCreateContainer: 50 * time.Millisecond}}
	fl := newFanoutFleet(t, 6, lat)
	broken := map[string]bool{"m002": true, "m004": true}
	for _, m := range fl.machines {
		if broken[m.name] {
			m.failCreate = "no space left on device (" + m.name + ")"
		}
	}
	p, err := MakePlan(fanoutApp(4, 6), fanoutSnapshot(6), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := (&Executor{C: fl.entry, Parallelism: 6}).Run(context.Background(), p)
	if o.Status != "partial" {
		t.Fatalf("status %s, want partial (%s)", o.Status, statuses(o))
	}
	byRow := stepsByRow(o)
	failedOn := map[string]int{}
	for i, r := range p.Rows {
		steps := byRow[i]
		if len(steps) != 3 {
			t.Fatalf("row %d (%s on %s) reported %d steps, want 3: %+v", i, r.NewName, r.Machine, len(steps), steps)
		}
		create := steps[0]
		switch create.Status {
		case StepFailed:
			failedOn[r.Machine]++
			if !broken[r.Machine] || !strings.Contains(create.Error, "no space left on device ("+r.Machine+")") {
				t.Errorf("row %d on %s failed with %q", i, r.Machine, create.Error)
			}
			for _, s := range steps[1:] {
				if s.Status != StepNeverAttempted {
					t.Errorf("row %d: %s after a failed create is %s", i, s.Action, s.Status)
				}
			}
		case StepCompleted:
			if broken[r.Machine] {
				t.Errorf("row %d completed a create on refusing Machine %s", i, r.Machine)
			}
		case StepNeverAttempted:
			if !strings.Contains(create.Error, "failed on m002") && !strings.Contains(create.Error, "failed on m004") {
				t.Errorf("row %d on %s never attempted for %q, want a failure on m002 or m004 named", i, r.Machine, create.Error)
			}
		}
	}
	if failedOn["m002"] != 4 || failedOn["m004"] != 4 {
		t.Errorf("failures by Machine %v, want each Service's create on m002 and m004 failed", failedOn)
	}
	for _, m := range fl.machines {
		if broken[m.name] && len(m.created) != 0 {
			t.Errorf("refusing Machine %s recorded creates %v", m.name, m.created)
		}
	}
}
