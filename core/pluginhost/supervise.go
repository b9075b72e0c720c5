package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/health/grpc_health_v1"
)

// healthService is the service name go-plugin's health server reports.
const healthService = "plugin"

// supervisor keeps one plugin connected: connect, publish, watch, withdraw,
// retry.
type supervisor struct {
	h     *Host
	entry Entry

	mu        sync.Mutex
	st        PluginStatus
	firstDone chan struct{}
	firstOnce sync.Once
}

func newSupervisor(h *Host, e Entry) *supervisor {
	st := PluginStatus{Name: e.Name, Lifecycle: e.Lifecycle, Health: HealthStarting, SHA256: e.SHA256, Capabilities: []string{}}
	if e.Lifecycle == LifecycleLongLived {
		st.Socket = h.socketFor(e)
	}
	return &supervisor{h: h, entry: e, st: st, firstDone: make(chan struct{})}
}

func (s *supervisor) status() PluginStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Capabilities = append([]string{}, s.st.Capabilities...)
	return st
}

func (s *supervisor) update(f func(*PluginStatus)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

func (s *supervisor) first() { s.firstOnce.Do(func() { close(s.firstDone) }) }

// run loops until ctx ends or the plugin is refused.
func (s *supervisor) run(ctx context.Context) {
	defer s.first()
	defer s.update(func(st *PluginStatus) {
		if st.Health != HealthRefused {
			st.Health = HealthStopped
		}
	})
	log := s.h.log.With("plugin", s.entry.Name, "lifecycle", s.entry.Lifecycle)
	delay := s.h.cfg.RestartDelay
	for {
		inst, err := s.connect(ctx)
		if ctx.Err() != nil {
			if inst != nil {
				inst.release()
			}
			return
		}
		if err != nil {
			var refused *RefusedError
			if errors.As(err, &refused) {
				log.Error("plugin refused; the host keeps running the others", "error", err)
				s.update(func(st *PluginStatus) { st.Health, st.Error = HealthRefused, err.Error() })
				s.first()
				return
			}
			log.Warn("plugin unavailable; retrying", "error", err, "retry_in", delay)
			s.update(func(st *PluginStatus) { st.Health, st.Error = HealthDown, err.Error() })
			s.first()
			if !sleep(ctx, delay) {
				return
			}
			delay = min(2*delay, s.h.cfg.MaxRestartDelay)
			continue
		}
		delay = s.h.cfg.RestartDelay
		s.publish(inst)
		log.Info("plugin healthy", "pid", inst.pid, "version", inst.info.GetPluginVersion(),
			"api_version", inst.api, "capabilities", inst.capabilities(), "launched", inst.launched)
		s.first()

		reason := s.watch(ctx, inst)
		gone := s.h.catalog.withdraw(s.entry.Name)
		s.h.changed()
		inst.release()
		if ctx.Err() != nil {
			return
		}
		log.Warn("plugin lost; capabilities withdrawn", "reason", reason, "withdrawn", gone, "pid", inst.pid)
		s.update(func(st *PluginStatus) {
			st.Health, st.Error, st.Capabilities = HealthDown, reason, []string{}
			st.Restarts++
		})
		if !sleep(ctx, delay) {
			return
		}
	}
}

func (s *supervisor) connect(ctx context.Context) (*instance, error) {
	if s.entry.Lifecycle == LifecycleLongLived {
		return s.h.attachLongLived(ctx, s.entry)
	}
	return s.h.startManaged(ctx, s.entry)
}

// publish records the instance and adds its capabilities to the catalog.
func (s *supervisor) publish(inst *instance) {
	caps := inst.capabilities()
	conflicts := s.h.catalog.publish(s.entry.Name, inst.api, caps, inst.conn)
	served := make([]string, 0, len(caps))
	for _, c := range caps {
		if p, err := s.h.catalog.Lookup(c); err == nil && p.Plugin == s.entry.Name {
			served = append(served, c)
		}
	}
	s.update(func(st *PluginStatus) {
		st.Health, st.Error = HealthHealthy, ""
		if len(conflicts) > 0 {
			st.Error = fmt.Sprintf("capabilities already served by another plugin: %v", conflicts)
		}
		st.Kind, st.Version, st.Description = inst.info.GetKind(), inst.info.GetPluginVersion(), inst.info.GetDescription()
		st.APIVersions, st.APIVersion = inst.info.GetApiVersions(), inst.api
		st.Capabilities, st.Pid, st.Launched = served, inst.pid, inst.launched
		st.RunningSHA256 = ""
		if inst.running != "" && inst.running != s.entry.SHA256 {
			st.RunningSHA256 = inst.running
		}
	})
	s.h.changed()
}

// watch returns why the plugin stopped being healthy, or when ctx ends.
// Process death counts at once; health checks must fail twice in a row so
// one slow answer does not restart a busy plugin.
func (s *supervisor) watch(ctx context.Context, inst *instance) string {
	hc := grpc_health_v1.NewHealthClient(inst.conn)
	interval := s.h.cfg.HealthInterval
	t := time.NewTicker(interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return "host stopping"
		case <-t.C:
		}
		if inst.client.Exited() {
			return fmt.Sprintf("process %d exited", inst.pid)
		}
		cctx, cancel := context.WithTimeout(ctx, max(interval, time.Second))
		resp, err := hc.Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: healthService})
		cancel()
		if ctx.Err() != nil {
			return "host stopping"
		}
		switch {
		case err != nil:
			failures++
			if failures >= 2 {
				return fmt.Sprintf("health check failed: %v", err)
			}
		case resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING:
			return fmt.Sprintf("health status %s", resp.GetStatus())
		default:
			failures = 0
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
