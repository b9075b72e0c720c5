package containers

import (
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"

	"github.com/ployz/ployz/core/rpc"
)

func TestExitLogKeepsTheExitDockerClears(t *testing.T) {
	l := newExitLog()
	now := time.Now()
	ev := func(a events.Action, at time.Time, attrs map[string]string) events.Message {
		return events.Message{Type: events.ContainerEventType, Action: a, TimeNano: at.UnixNano(), Actor: events.Actor{ID: "c1", Attributes: attrs}}
	}
	l.event(ev(events.ActionOOM, now, nil))
	l.event(ev(events.ActionDie, now.Add(10*time.Millisecond), map[string]string{"exitCode": "137"}))

	running := rpc.ContainerObservation{ID: "c1", State: "running"}
	l.fill(&running)
	if running.ExitCode != 137 || !running.OOMKilled || running.FinishedAt == "" {
		t.Fatalf("running after an OOM kill: %+v", running)
	}
	// An exited Container's exit is Docker's own: left alone.
	exited := rpc.ContainerObservation{ID: "c1", State: "exited", ExitCode: 1, FinishedAt: "x"}
	l.fill(&exited)
	if exited.ExitCode != 1 || exited.OOMKilled || exited.FinishedAt != "x" {
		t.Fatalf("exited Container rewritten: %+v", exited)
	}
	// A later plain crash is not an OOM kill.
	l.event(ev(events.ActionDie, now.Add(time.Minute), map[string]string{"exitCode": "2"}))
	again := rpc.ContainerObservation{ID: "c1", State: "running"}
	l.fill(&again)
	if again.ExitCode != 2 || again.OOMKilled {
		t.Fatalf("second crash: %+v", again)
	}
	l.event(ev(events.ActionDestroy, now.Add(2*time.Minute), nil))
	gone := rpc.ContainerObservation{ID: "c1", State: "running"}
	l.fill(&gone)
	if gone.ExitCode != 0 || gone.FinishedAt != "" {
		t.Fatalf("destroyed Container still remembered: %+v", gone)
	}
}
