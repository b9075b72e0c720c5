package render

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

func TestLastExit(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		co   rpc.ContainerObservation
		want string
	}{
		{rpc.ContainerObservation{}, "-"},
		{rpc.ContainerObservation{ExitCode: 137, OOMKilled: true, FinishedAt: "2026-12-01T09:58:00Z"}, "137 OOM-killed (2 minutes ago)"},
		{rpc.ContainerObservation{ExitCode: 2, FinishedAt: "2026-12-01T09:59:30Z"}, "2 (30 seconds ago)"},
	}
	for _, c := range cases {
		if got := LastExit(c.co, now); got != c.want {
			t.Errorf("LastExit(%+v) = %q, want %q", c.co, got, c.want)
		}
	}
}

func TestProgressLiveRows(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b, live: true}
	a := deploy.Step{Row: 0, Machine: "m1", Service: "web", Action: "create_container", Container: "w1"}
	c := deploy.Step{Row: 1, Machine: "m2", Service: "web", Action: "create_container", Container: "w2"}
	p.event(deploy.Event{Step: a})
	p.event(deploy.Event{Step: c})
	a.Status, a.DurationMS = deploy.StepCompleted, 12
	p.event(deploy.Event{Step: a, Done: true})
	out := b.String()
	// Two rows in flight, then both erased, the finished one printed for
	// good and the one still running drawn again.
	for _, want := range []string{"  ... m1 web create_container w1", "\033[2A\033[J  ok  m1 web create_container w1 (12ms)\n  ... m2 web create_container w2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output %q lacks %q", out, want)
		}
	}
	if p.drawn != 1 {
		t.Fatalf("%d live rows drawn, want 1", p.drawn)
	}
}

// TestPrintPlanTCPIngress: the plan names a tcp route by its port.
func TestPrintPlanTCPIngress(t *testing.T) {
	var b bytes.Buffer
	Plan(&b, deploy.Plan{Namespace: "d-prod", Services: []deploy.ServiceSummary{{Name: "db", Ingress: []deploy.IngressRoute{
		{Protocol: "tcp", Port: 5432, ContainerPort: 5433}, {Hostname: "a.example.test", ContainerPort: 80}}}}}, "")
	out := b.String()
	if !strings.Contains(out, "ingress: tcp/5432 -> db:5433 on every Machine's :5432") || !strings.Contains(out, "ingress: a.example.test -> db:80") {
		t.Errorf("plan:\n%s", out)
	}
}
