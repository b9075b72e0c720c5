package dashsource

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// Source is a dashboard.Source over one Session, opened on first use and
// kept: its entry outlives any one request.
type Source struct {
	open func(context.Context) (*client.Session, error)
	mu   sync.Mutex
	s    *client.Session
}

var _ dashboard.Source = (*Source)(nil)

// New is a Source that opens its Session with open on first use.
func New(open func(context.Context) (*client.Session, error)) *Source {
	return &Source{open: open}
}

func (x *Source) session() (*client.Session, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.s != nil {
		return x.s, nil
	}
	s, err := x.open(context.Background())
	if err != nil {
		return nil, err
	}
	x.s = s
	return s, nil
}

// Close closes the Session if it was opened.
func (x *Source) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.s == nil {
		return nil
	}
	return x.s.Close()
}

// Metrics asks every Machine (each Machine's own without a Service);
// more than a day back reads the 5-minute Rollups.
func (x *Source) Metrics(ctx context.Context, q dashboard.MetricsQuery) ([]dashboard.MachineMetrics, error) {
	s, err := x.session()
	if err != nil {
		return nil, err
	}
	req := rpc.QueryMetricsRequest{Machine: q.Service == "", Namespace: q.Namespace, Service: q.Service, Since: q.Since.UnixNano(), Until: q.Until.UnixNano()}
	if q.Until.Sub(q.Since) > 24*time.Hour {
		req.StepSeconds = 300
	}
	return observe.Metrics(ctx, s.Entry(), rpc.Target{All: true}, req)
}

// Logs follows a Service's lines on every Machine, reopening a broken
// stream with backoff, until ctx ends.
func (x *Source) Logs(ctx context.Context, ns, service string, emit func(dashboard.LogLine)) error {
	s, err := x.session()
	if err != nil {
		return err
	}
	return s.FollowLogs(ctx, client.LogFollow{Query: rpc.LogQuery{Namespace: ns, Service: service}, Tail: 50, Reopen: true},
		func(e client.LogEvent) { emit(logLine(e)) })
}

// logLine is a followed line or a Machine's stream news, as the page shows it.
func logLine(e client.LogEvent) dashboard.LogLine {
	switch {
	case e.Line != nil:
		return dashboard.LogLine{Machine: e.Machine, Container: render.ContainerLabel(e.Line.LogRecord),
			Time: render.LogTime(e.Line.Time), Text: e.Line.Text}
	case e.Up:
		return dashboard.LogLine{Machine: e.Machine, Stream: "up"}
	case e.Down:
		return dashboard.LogLine{Machine: e.Machine, Error: e.Err.Error(), Stream: "down", RetrySeconds: e.Retry.Seconds()}
	default:
		return dashboard.LogLine{Error: "machine " + e.Machine + ": " + e.Err.Error()}
	}
}

// Scale deploys the latest Saved State with the Service's replicas set
// to n, as `ployz scale -y` does.
func (x *Source) Scale(ctx context.Context, ns, service string, n int, out io.Writer) error {
	return x.deployLatest(ctx, ns, out, func(s *client.Session, p client.Project) (*client.DeployPlan, error) {
		return s.PlanScale(ctx, p, service, n)
	})
}

// Restart replaces the Service's running Containers, start-first, as
// `ployz service restart -y` does.
func (x *Source) Restart(ctx context.Context, ns, service string, out io.Writer) error {
	return x.deployLatest(ctx, ns, out, func(s *client.Session, p client.Project) (*client.DeployPlan, error) {
		return s.PlanRestart(ctx, p, service)
	})
}

// deployLatest plans with plan and applies at once, writing the plan,
// the steps and the outcome to out.
func (x *Source) deployLatest(ctx context.Context, ns string, out io.Writer, plan func(*client.Session, client.Project) (*client.DeployPlan, error)) error {
	s, err := x.session()
	if err != nil {
		return err
	}
	p, err := s.ProjectOf(ctx, ns)
	if err != nil {
		return err
	}
	dp, err := plan(s, p)
	if err != nil {
		return err
	}
	render.DeployPlan(out, dp)
	res, err := s.ApplyDeploy(ctx, dp, render.Hooks(out, false))
	if shown(err) {
		render.DeployResult(out, res)
	}
	return err
}

// StartStop starts or stops the Service's existing Containers, as
// `ployz start|stop -y` do.
func (x *Source) StartStop(ctx context.Context, ns, service, verb string, out io.Writer) error {
	s, err := x.session()
	if err != nil {
		return err
	}
	rp, err := s.PlanStartStop(ctx, ns, service, verb)
	if err != nil {
		return err
	}
	render.Plan(out, rp.Plan, "")
	render.Unobserved(out, rp.Snapshot)
	res, err := s.ApplyRows(ctx, rp, render.Hooks(out, false))
	if rp.Plan.Changes() > 0 {
		render.Outcome(out, rp.Plan, res.Outcome)
	}
	return err
}

// shown says whether an applied Deploy's result is worth printing: it
// ran (completely or partly).
func shown(err error) bool { return err == nil || client.IsPartial(err) }
