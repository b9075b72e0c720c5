package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/observe"
	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
)

// logRoutes forward log_history and tail_logs to the Log Store plugin.
// They are advertised only while a healthy plugin serves the capability
// of the same name. They replaced the Docker-direct container_logs and
// follow_logs (existing Containers only); an older CLI asking for those is
// told to upgrade (core/rpc's retired commands). Only wait_ready still reads
// Docker directly, for the last lines of a Container that just failed.
func (d *Daemon) logRoutes() {
	history := rpc.Bind(rpc.ReadLogHistory, d.logHistory)
	history.Available = func() bool { return d.plugins != nil && d.plugins.Available(observe.CapLogHistory) }
	d.rpc.Handle(history)
	d.rpc.HandleStream(rpc.BindStream(rpc.TailLogs, d.tailLogs))
	// HandleStream catalogues the stream as always served; advertise it,
	// like log_history, only while the plugin is healthy.
	d.rpc.Handle(rpc.Route{Command: rpc.CmdTailLogs, Capability: observe.CapTailLogs,
		Handler: func(context.Context, json.RawMessage) (any, error) {
			return nil, rpc.Errorf(rpc.CodeInvalidArgument, "%s is a streaming command: use Stream", rpc.CmdTailLogs)
		},
		Available: func() bool { return d.plugins != nil && d.plugins.Available(observe.CapTailLogs) }})
}

func logSelector(q rpc.LogQuery) *logstorev1.Selector {
	return &logstorev1.Selector{Namespace: q.Namespace, Service: q.Service, Deployment: q.Deployment, ContainerId: q.Container}
}

func checkLogQuery(q rpc.LogQuery) error {
	if len(q.Grep) > rpc.MaxLogGrep {
		return rpc.InvalidField("grep", "expression of %d bytes exceeds %d", len(q.Grep), rpc.MaxLogGrep)
	}
	if _, err := regexp.Compile(q.Grep); err != nil {
		return rpc.InvalidField("grep", "%v", err)
	}
	return nil
}

func (d *Daemon) logHistory(ctx context.Context, req rpc.LogHistoryRequest) (rpc.LogHistory, error) {
	switch {
	case req.Limit < 0 || req.Limit > rpc.MaxLogLimit:
		return rpc.LogHistory{}, rpc.InvalidField("limit", "%d is not between 0 and %d", req.Limit, rpc.MaxLogLimit)
	case req.Since < 0:
		return rpc.LogHistory{}, rpc.InvalidField("since_unix_nano", "%d is negative", req.Since)
	case req.Until != 0 && req.Until < req.Since:
		return rpc.LogHistory{}, rpc.InvalidField("until_unix_nano", "%d is before since_unix_nano %d", req.Until, req.Since)
	}
	if err := checkLogQuery(req.LogQuery); err != nil {
		return rpc.LogHistory{}, err
	}
	if d.plugins == nil {
		return rpc.LogHistory{}, rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", observe.CapLogHistory)
	}
	out := rpc.LogHistory{MachineID: d.record().ID, Lines: []rpc.LogRecord{}}
	err := d.plugins.Call(ctx, observe.CapLogHistory, func(ctx context.Context, conn *grpc.ClientConn) error {
		resp, err := logstorev1.NewLogStoreClient(conn).LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: logSelector(req.LogQuery),
			FromUnixNanos: req.Since, ToUnixNanos: req.Until, Limit: uint32(req.Limit), Grep: req.Grep, Newest: req.Newest})
		if err != nil {
			return err
		}
		for _, e := range resp.GetEntries() {
			out.Lines = append(out.Lines, logRecord(e))
		}
		for _, g := range resp.GetGaps() {
			out.Gaps = append(out.Gaps, rpc.LogGap{From: g.GetFromUnixNanos(), To: g.GetToUnixNanos(), Reason: g.GetReason()})
		}
		out.Truncated, out.CorruptBytes = resp.GetTruncated(), resp.GetCorruptBytes()
		return nil
	})
	if err != nil {
		return rpc.LogHistory{}, pluginErr(err, observe.CapLogHistory)
	}
	return out, nil
}

func (d *Daemon) tailLogs(ctx context.Context, req rpc.TailLogsRequest, s rpc.StreamConn) error {
	if req.Tail < 0 || req.Tail > rpc.MaxLogLimit {
		return rpc.InvalidField("tail", "%d is not between 0 and %d", req.Tail, rpc.MaxLogLimit)
	}
	if err := checkLogQuery(req.LogQuery); err != nil {
		return err
	}
	if d.plugins == nil {
		return rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", observe.CapTailLogs)
	}
	err := d.plugins.Call(ctx, observe.CapTailLogs, func(ctx context.Context, conn *grpc.ClientConn) error {
		st, err := logstorev1.NewLogStoreClient(conn).TailLogs(ctx, &logstorev1.TailLogsRequest{Selector: logSelector(req.LogQuery),
			Lines: uint32(req.Tail), Follow: req.Follow, Grep: req.Grep})
		if err != nil {
			return err
		}
		for {
			e, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := rpc.TailLogs.Send(s, logRecord(e)); err != nil {
				return err
			}
		}
	})
	if ctx.Err() != nil {
		return nil // the client stopped following
	}
	if err != nil {
		return pluginErr(err, observe.CapTailLogs)
	}
	return nil
}

func logRecord(e *logstorev1.LogEntry) rpc.LogRecord {
	return rpc.LogRecord{Time: e.GetTimeUnixNanos(), Stream: e.GetStream(), Text: string(e.GetLine()), ContainerID: e.GetContainerId(),
		ContainerName: e.GetContainerName(), Namespace: e.GetNamespace(), Service: e.GetService(), Deployment: e.GetDeployment()}
}

// pluginErr is feature.PluginErr.
func pluginErr(err error, capability string) error { return feature.PluginErr(err, capability) }

// logsHeld reports whether this Machine's Log Store holds a line of
// Container id at or after since (unix nanoseconds): an ended one-off
// run is removed only then, since the store cannot read the files of a
// Container Docker removed before it opened them.
func (d *Daemon) logsHeld(ctx context.Context, id string, since int64) (bool, error) {
	if d.plugins == nil || !d.plugins.Available(observe.CapLogHistory) {
		return false, rpc.Errorf(rpc.CodeUnavailable, "no Log Store is serving on this Machine").With("capability", observe.CapLogHistory)
	}
	held := false
	err := d.plugins.Call(ctx, observe.CapLogHistory, func(ctx context.Context, conn *grpc.ClientConn) error {
		resp, err := logstorev1.NewLogStoreClient(conn).LogHistory(ctx, &logstorev1.LogHistoryRequest{
			Selector: &logstorev1.Selector{ContainerId: id}, FromUnixNanos: since - 1, Limit: 1})
		if err != nil {
			return err
		}
		for _, e := range resp.GetEntries() {
			held = held || e.GetTimeUnixNanos() >= since
		}
		return nil
	})
	if err != nil {
		return false, pluginErr(err, observe.CapLogHistory)
	}
	return held, nil
}
