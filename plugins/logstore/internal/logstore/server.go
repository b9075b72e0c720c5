package logstore

import (
	"context"
	"fmt"
	"regexp"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
)

// Answer bounds: a LogHistory answer holds at most maxLimit lines and
// about maxAnswerBytes of text (it travels in one message), and says so
// (truncated) when it stopped early.
const (
	defaultLimit   = 1000
	maxLimit       = 50000
	maxAnswerBytes = 3 << 20
	maxGrep        = 1024
)

// Server answers the LogStore service from a Store.
type Server struct {
	logstorev1.UnimplementedLogStoreServer

	mu    sync.RWMutex
	store *Store
	in    *Ingester
}

// ready makes s answer from st, fed by in.
func (s *Server) ready(st *Store, in *Ingester) {
	s.mu.Lock()
	s.store, s.in = st, in
	s.mu.Unlock()
}

func (s *Server) get() (*Store, *Ingester, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.store == nil {
		return nil, nil, status.Error(codes.Unavailable, "the log store is opening")
	}
	return s.store, s.in, nil
}

func selector(sel *logstorev1.Selector) Selector {
	return Selector{Container: sel.GetContainerId(), Namespace: sel.GetNamespace(), Service: sel.GetService(), Deployment: sel.GetDeployment()}
}

func compileGrep(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	if len(expr) > maxGrep {
		return nil, status.Errorf(codes.InvalidArgument, "grep: expression of %d bytes exceeds %d", len(expr), maxGrep)
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "grep: %v", err)
	}
	return re, nil
}

func entry(h Hit) *logstorev1.LogEntry {
	return &logstorev1.LogEntry{TimeUnixNanos: h.TimeNano, ContainerId: h.Container.ID, Stream: streamName(h.Stream), Line: h.Line,
		Namespace: h.Container.Namespace, Service: h.Container.Service, Deployment: h.Container.Deployment, ContainerName: h.Container.Name}
}

// LogHistory implements logstorev1.LogStoreServer.
func (s *Server) LogHistory(_ context.Context, req *logstorev1.LogHistoryRequest) (*logstorev1.LogHistoryResponse, error) {
	st, in, err := s.get()
	if err != nil {
		return nil, err
	}
	grep, err := compileGrep(req.GetGrep())
	if err != nil {
		return nil, err
	}
	if req.GetToUnixNanos() != 0 && req.GetToUnixNanos() < req.GetFromUnixNanos() {
		return nil, status.Errorf(codes.InvalidArgument, "to_unix_nanos %d is before from_unix_nanos %d", req.GetToUnixNanos(), req.GetFromUnixNanos())
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultLimit
	}
	if limit > maxLimit {
		return nil, status.Errorf(codes.InvalidArgument, "limit %d exceeds %d", limit, maxLimit)
	}
	res, err := st.Query(Query{Sel: selector(req.GetSelector()), From: req.GetFromUnixNanos(), To: req.GetToUnixNanos(),
		Limit: limit, Newest: req.GetNewest(), Grep: grep})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "log store: %v", err)
	}
	resp := &logstorev1.LogHistoryResponse{Truncated: res.Truncated, CorruptBytes: in.Corrupt()}
	hits, cut := capBytes(res.Hits, req.GetNewest())
	resp.Truncated = resp.Truncated || cut
	for _, h := range hits {
		resp.Entries = append(resp.Entries, entry(h))
	}
	for _, g := range res.Gaps {
		resp.Gaps = append(resp.Gaps, &logstorev1.Gap{FromUnixNanos: g.From, ToUnixNanos: g.To, Reason: g.Reason})
	}
	return resp, nil
}

// capBytes keeps about maxAnswerBytes of lines, the newest ones when
// newest is set.
func capBytes(hits []Hit, newest bool) ([]Hit, bool) {
	total := 0
	for i := range hits {
		j := i
		if newest {
			j = len(hits) - 1 - i
		}
		total += len(hits[j].Line) + 64
		if total > maxAnswerBytes {
			if newest {
				return hits[j+1:], true
			}
			return hits[:j], true
		}
	}
	return hits, false
}

// TailLogs implements logstorev1.LogStoreServer: the last req.Lines
// lines, then (with follow) new ones as they are stored.
func (s *Server) TailLogs(req *logstorev1.TailLogsRequest, stream logstorev1.LogStore_TailLogsServer) error {
	st, _, err := s.get()
	if err != nil {
		return err
	}
	grep, err := compileGrep(req.GetGrep())
	if err != nil {
		return err
	}
	if req.GetLines() > maxLimit {
		return status.Errorf(codes.InvalidArgument, "lines %d exceeds %d", req.GetLines(), maxLimit)
	}
	sel := selector(req.GetSelector())
	var sub *Sub
	if req.GetFollow() {
		sub = st.Subscribe(sel, grep) // before the history, so nothing falls between
		defer st.Unsubscribe(sub)
	}
	sent := map[string]int64{} // per Container, the last time sent
	if req.GetLines() > 0 {
		res, err := st.Query(Query{Sel: sel, Limit: int(req.GetLines()), Newest: true, Grep: grep})
		if err != nil {
			return status.Errorf(codes.Internal, "log store: %v", err)
		}
		hits, _ := capBytes(res.Hits, true)
		for _, h := range hits {
			if err := stream.Send(entry(h)); err != nil {
				return err
			}
			sent[h.Container.ID] = h.TimeNano
		}
	}
	if sub == nil {
		return nil
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case h, ok := <-sub.C:
			if !ok {
				if sub.Overflowed() {
					return status.Error(codes.ResourceExhausted, fmt.Sprintf("this follower fell %d lines behind; lines were dropped", followBuffer))
				}
				return nil
			}
			if t, ok := sent[h.Container.ID]; ok && h.TimeNano <= t {
				continue // already in the history sent
			}
			if err := stream.Send(entry(h)); err != nil {
				return err
			}
		}
	}
}
