package containers

import (
	"strconv"
	"sync"
	"time"

	"github.com/docker/docker/api/types/events"

	"github.com/ployz/ployz/core/rpc"
)

// exitLog remembers each Container's last exit as Docker's events told it.
// Docker clears ExitCode and OOMKilled when a restart policy starts the
// Container again, so without it a replica that crashes and comes back
// would look as if nothing happened.
type exitLog struct {
	mu   sync.Mutex
	last map[string]lastExit // by Container ID
}

// lastExit is one Container's last exit.
type lastExit struct {
	Code int
	OOM  bool
	At   time.Time
}

func newExitLog() *exitLog { return &exitLog{last: map[string]lastExit{}} }

// event records a die or oom event; any other event is ignored.
func (l *exitLog) event(m events.Message) {
	if l == nil || m.Type != events.ContainerEventType || m.Actor.ID == "" {
		return
	}
	at := time.Unix(0, m.TimeNano)
	if m.TimeNano == 0 {
		at = time.Unix(m.Time, 0)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.last[m.Actor.ID]
	switch m.Action {
	case events.ActionOOM:
		// An OOM kill is followed by its die event: mark the exit to come.
		e.OOM, e.At = true, at
	case events.ActionDie:
		code, err := strconv.Atoi(m.Actor.Attributes["exitCode"])
		if err != nil {
			code = -1
		}
		oom := e.OOM && at.Sub(e.At) < 5*time.Second
		e = lastExit{Code: code, OOM: oom, At: at}
	case events.ActionDestroy:
		delete(l.last, m.Actor.ID)
		return
	default:
		return
	}
	l.last[m.Actor.ID] = e
}

// fill completes ob with the last exit of a Container that runs again:
// Docker reports an exited Container's exit itself, but clears it on the
// restart.
func (l *exitLog) fill(ob *rpc.ContainerObservation) {
	if l == nil || ob.State != "running" {
		return
	}
	l.mu.Lock()
	e, ok := l.last[ob.ID]
	l.mu.Unlock()
	if !ok {
		return
	}
	ob.ExitCode, ob.OOMKilled = e.Code, e.OOM
	ob.FinishedAt = e.At.UTC().Format(time.RFC3339)
}
