package observe

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
	"google.golang.org/grpc"
)

// logRoutes forward log_history to the Log Store plugin, advertised
// only while a healthy plugin serves the capability of the same name;
// tail_logs (a stream) is advertised the same way. They replaced the
// Docker-direct container_logs and follow_logs (existing Containers
// only); an older CLI asking for those is told to upgrade (core/rpc's
// retired commands). Only wait_ready still reads Docker directly, for
// the last lines of a Container that just failed.
func (f *Feature) logRoutes() []rpc.Route {
	history := rpc.Bind(rpc.ReadLogHistory, f.logHistory)
	history.Available = func() bool { return f.available(sdkobserve.CapLogHistory) }
	// The stream is catalogued as always served; this route, registered
	// after it, advertises it like log_history, only while the plugin is
	// healthy.
	tail := rpc.Route{Command: rpc.CmdTailLogs, Capability: sdkobserve.CapTailLogs,
		Handler: func(context.Context, json.RawMessage) (any, error) {
			return nil, rpc.Errorf(rpc.CodeInvalidArgument, "%s is a streaming command: use Stream", rpc.CmdTailLogs)
		},
		Available: func() bool { return f.available(sdkobserve.CapTailLogs) }}
	return []rpc.Route{history, tail}
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

func (f *Feature) logHistory(ctx context.Context, req rpc.LogHistoryRequest) (rpc.LogHistory, error) {
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
	if f.host.Plugins() == nil {
		return rpc.LogHistory{}, rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", sdkobserve.CapLogHistory)
	}
	out := rpc.LogHistory{MachineID: f.host.Machine().ID, Lines: []rpc.LogRecord{}}
	err := f.host.Plugins().Call(ctx, sdkobserve.CapLogHistory, func(ctx context.Context, conn *grpc.ClientConn) error {
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
		return rpc.LogHistory{}, feature.PluginErr(err, sdkobserve.CapLogHistory)
	}
	return out, nil
}

func (f *Feature) tailLogs(ctx context.Context, req rpc.TailLogsRequest, s rpc.StreamConn) error {
	if req.Tail < 0 || req.Tail > rpc.MaxLogLimit {
		return rpc.InvalidField("tail", "%d is not between 0 and %d", req.Tail, rpc.MaxLogLimit)
	}
	if err := checkLogQuery(req.LogQuery); err != nil {
		return err
	}
	if f.host.Plugins() == nil {
		return rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", sdkobserve.CapTailLogs)
	}
	err := f.host.Plugins().Call(ctx, sdkobserve.CapTailLogs, func(ctx context.Context, conn *grpc.ClientConn) error {
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
		return feature.PluginErr(err, sdkobserve.CapTailLogs)
	}
	return nil
}

func logRecord(e *logstorev1.LogEntry) rpc.LogRecord {
	return rpc.LogRecord{Time: e.GetTimeUnixNanos(), Stream: e.GetStream(), Text: string(e.GetLine()), ContainerID: e.GetContainerId(),
		ContainerName: e.GetContainerName(), Namespace: e.GetNamespace(), Service: e.GetService(), Deployment: e.GetDeployment()}
}

// LogsHeld reports whether this Machine's Log Store holds a line of
// Container id at or after since (unix nanoseconds): an ended one-off
// run is removed only then, since the store cannot read the files of a
// Container Docker removed before it opened them.
func (f *Feature) LogsHeld(ctx context.Context, id string, since int64) (bool, error) {
	if !f.available(sdkobserve.CapLogHistory) {
		return false, rpc.Errorf(rpc.CodeUnavailable, "no Log Store is serving on this Machine").With("capability", sdkobserve.CapLogHistory)
	}
	held := false
	err := f.host.Plugins().Call(ctx, sdkobserve.CapLogHistory, func(ctx context.Context, conn *grpc.ClientConn) error {
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
		return false, feature.PluginErr(err, sdkobserve.CapLogHistory)
	}
	return held, nil
}
