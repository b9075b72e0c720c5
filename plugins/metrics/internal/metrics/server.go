package metrics

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
)

// Server answers QueryMetrics from a Store, and keeps the last tick for
// the Prometheus endpoint.
type Server struct {
	metricsv1.UnimplementedMetricsServer

	mu    sync.RWMutex
	store *Store
	last  Tick
	now   func() time.Time
}

func (s *Server) ready(st *Store) {
	s.mu.Lock()
	s.store = st
	s.mu.Unlock()
}

func (s *Server) setLast(t Tick) {
	s.mu.Lock()
	s.last = t
	s.mu.Unlock()
}

func (s *Server) lastTick() Tick {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.last
}

func subjectPB(sub Subject) *metricsv1.Selector {
	return &metricsv1.Selector{ContainerId: sub.Container, ContainerName: sub.Name, Namespace: sub.Namespace, Service: sub.Service,
		Deployment: sub.Deployment, Machine: sub.Container == "" && sub.Service == ""}
}

// QueryMetrics implements metricsv1.MetricsServer.
func (s *Server) QueryMetrics(_ context.Context, req *metricsv1.QueryMetricsRequest) (*metricsv1.QueryMetricsResponse, error) {
	s.mu.RLock()
	st := s.store
	s.mu.RUnlock()
	if st == nil {
		return nil, status.Error(codes.Unavailable, "the metrics store is opening")
	}
	if req.GetToUnixNanos() != 0 && req.GetToUnixNanos() < req.GetFromUnixNanos() {
		return nil, status.Errorf(codes.InvalidArgument, "to_unix_nanos %d is before from_unix_nanos %d", req.GetToUnixNanos(), req.GetFromUnixNanos())
	}
	for _, m := range req.GetMetrics() {
		if _, ok := metricID(m); !ok {
			return nil, status.Errorf(codes.InvalidArgument, "metrics: unknown metric %q (known: %v)", m, metricIDs)
		}
	}
	sel := req.GetSelector()
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	res, err := st.Query(Query{Machine: sel.GetMachine(), Container: sel.GetContainerId(), Namespace: sel.GetNamespace(),
		Service: sel.GetService(), Deployment: sel.GetDeployment(), Metrics: req.GetMetrics(), From: req.GetFromUnixNanos(),
		To: req.GetToUnixNanos(), Step: time.Duration(req.GetStepSeconds()) * time.Second}, now)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "metrics store: %v", err)
	}
	resp := &metricsv1.QueryMetricsResponse{ResolutionSeconds: uint32(res.Resolution / time.Second)}
	for _, sr := range res.Series {
		out := &metricsv1.Series{Metric: sr.Metric, Subject: subjectPB(sr.Subject)}
		for _, p := range sr.Points {
			pp := &metricsv1.Point{TimeUnixNanos: p.T, Value: p.Value}
			if p.Rollup {
				pp.Min, pp.Max, pp.Last = p.Min, p.Max, p.Last
			}
			out.Points = append(out.Points, pp)
		}
		resp.Series = append(resp.Series, out)
	}
	for _, g := range res.Gaps {
		pg := &metricsv1.Gap{Metric: g.Metric, FromUnixNanos: g.From, ToUnixNanos: g.To, Reason: g.Reason}
		if g.Subject != nil {
			pg.Subject = subjectPB(*g.Subject)
		}
		resp.Gaps = append(resp.Gaps, pg)
	}
	for _, m := range res.Markers {
		resp.Markers = append(resp.Markers, &metricsv1.Marker{TimeUnixNanos: m.T, Subject: subjectPB(m.Subject), Kind: m.Kind, Detail: m.Detail})
	}
	return resp, nil
}
