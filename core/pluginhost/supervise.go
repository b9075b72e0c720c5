package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/ployz/ployz/sdk"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// healthService is the service name go-plugin's health server reports.
const healthService = "plugin"

// supervisor keeps one plugin connected: connect, publish, watch, withdraw,
// retry.
type supervisor struct {
	h *Host

	mu        sync.Mutex
	e         Entry
	st        PluginStatus
	inst      *instance // connected now, nil otherwise
	switching string    // "running→installed" digests a switch was tried for
	switchErr string    // why that switch was refused, kept across re-attaches
	changed   chan struct{}
	firstDone chan struct{}
	firstOnce sync.Once

	// On-demand plugins (Entry.OnDemand) only: wanted is set once a call
	// or Wake asked for the plugin and cleared when a start fails (the
	// next call tries again); attempt is the start callers wait on; wake
	// rouses the idle supervisor.
	wanted  bool
	attempt *startAttempt
	wake    chan struct{}
	// adInfo is adDigest's `info` (read once per digest).
	adDigest string
	adInfo   *pluginv1.InfoResponse
}

// startAttempt is one start of an on-demand plugin; done closes once it
// serves (err nil) or the start failed (err says why).
type startAttempt struct {
	done chan struct{}
	err  error
}

func newSupervisor(h *Host, e Entry) *supervisor {
	s := &supervisor{h: h, changed: make(chan struct{}, 1), firstDone: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.e = e
	s.st = PluginStatus{Name: e.Name, Health: HealthStarting, Capabilities: []string{}}
	s.setStatusEntry(e)
	return s
}

func (s *supervisor) setStatusEntry(e Entry) {
	s.st.Lifecycle, s.st.SHA256 = e.Lifecycle, e.SHA256
	s.st.Socket = ""
	if e.Lifecycle == LifecycleLongLived {
		s.st.Socket = s.h.socketFor(e)
	}
}

func (s *supervisor) entry() Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

// setEntry switches to a changed manifest entry and wakes the supervisor.
func (s *supervisor) setEntry(e Entry) {
	s.mu.Lock()
	s.e = e
	s.setStatusEntry(e)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *supervisor) status() PluginStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Capabilities = append([]string{}, s.st.Capabilities...)
	st.StoreEventsDropped = maps.Clone(s.st.StoreEventsDropped)
	return st
}

func (s *supervisor) update(f func(*PluginStatus)) {
	s.mu.Lock()
	f(&s.st)
	s.mu.Unlock()
}

func (s *supervisor) first() { s.firstOnce.Do(func() { close(s.firstDone) }) }

// run loops until ctx ends.
func (s *supervisor) run(ctx context.Context) {
	defer s.first()
	defer s.update(func(st *PluginStatus) {
		if st.Health != HealthRefused {
			st.Health = HealthStopped
		}
	})
	delay := s.h.cfg.RestartDelay
	for {
		e := s.entry()
		log := s.h.log.With("plugin", e.Name, "lifecycle", e.Lifecycle)
		var inst *instance
		var err error
		if e.OnDemand && !s.isWanted() {
			if inst = s.idle(ctx, e); inst == nil {
				if ctx.Err() != nil {
					return
				}
				continue
			}
		} else {
			if e.OnDemand {
				s.update(func(st *PluginStatus) { st.Health = HealthStarting })
			}
			inst, err = s.connect(ctx, e)
		}
		if ctx.Err() != nil {
			if inst != nil {
				inst.release()
			}
			s.finishStart(errors.New("host stopping"))
			return
		}
		if err != nil && e.OnDemand {
			// Back to idle, capabilities still advertised: the next call
			// (or Wake) tries again, nothing retries in a loop meanwhile.
			log.Warn("on-demand plugin did not start; the next call retries", "error", err)
			s.update(func(st *PluginStatus) { st.Health, st.Error = HealthIdle, err.Error() })
			s.finishStart(err)
			s.first()
			continue
		}
		if err != nil {
			// A plugin no longer on demand drops what it advertised idle.
			if gone := s.h.catalog.withdraw(e.Name); len(gone) > 0 {
				s.h.changed()
			}
			s.finishStart(err)
			var refused *RefusedError
			if errors.As(err, &refused) {
				// Retrying cannot help until the manifest entry changes.
				log.Error("plugin refused; the host keeps running the others", "error", err)
				s.update(func(st *PluginStatus) { st.Health, st.Error = HealthRefused, err.Error() })
				s.first()
				select {
				case <-ctx.Done():
					return
				case <-s.changed:
					continue
				}
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
		s.publish(e, inst)
		log.Info("plugin healthy", "pid", inst.pid, "version", inst.info.GetPluginVersion(),
			"api_version", inst.api, "capabilities", inst.capabilities(), "launched", inst.launched)
		s.finishStart(nil)
		s.first()

		reason := s.watch(ctx, inst)
		s.mu.Lock()
		s.inst = nil
		s.mu.Unlock()
		// The status says down before the catalog loses the capabilities,
		// so whoever sees them gone reads why (a host stopping ends as
		// stopped, run's defer).
		s.update(func(st *PluginStatus) {
			st.Health, st.Error, st.Capabilities = HealthDown, reason, []string{}
			if ctx.Err() == nil {
				st.Restarts++
			}
		})
		gone := s.h.catalog.withdraw(e.Name)
		s.h.changed()
		inst.release()
		if ctx.Err() != nil {
			return
		}
		log.Warn("plugin lost; capabilities withdrawn", "reason", reason, "withdrawn", gone, "pid", inst.pid)
		if !sleep(ctx, s.h.cfg.RestartDelay) {
			return
		}
	}
}

// isWanted reports whether an on-demand plugin was asked to run.
func (s *supervisor) isWanted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wanted
}

// demand asks for an on-demand plugin to run and returns the start to
// wait on, nil when it serves already. Concurrent callers share one
// start.
func (s *supervisor) demand() *startAttempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst != nil {
		return nil
	}
	s.wanted = true
	if s.attempt == nil {
		s.attempt = &startAttempt{done: make(chan struct{})}
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return s.attempt
}

// finishStart ends the pending start, if any: err nil means the plugin
// serves; otherwise it is no longer wanted, so a later call starts it anew.
func (s *supervisor) finishStart(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.wanted = false
	}
	if s.attempt != nil {
		s.attempt.err = err
		close(s.attempt.done)
		s.attempt = nil
	}
}

// idle keeps an on-demand plugin stopped with its capabilities advertised
// until it is wanted (nil returned, the caller starts it), its manifest
// entry changes (nil: the caller reads it again, so an upgrade's binary is
// the one advertised and later started) or ctx ends. A long-lived process
// that already serves (started before this host, e.g. across a ployzd
// restart) is attached to and returned instead: it is not left orphaned.
func (s *supervisor) idle(ctx context.Context, e Entry) *instance {
	if e.Lifecycle == LifecycleLongLived {
		if inst, err := s.h.reattach(ctx, e, s.h.socketFor(e)); err == nil {
			s.mu.Lock()
			s.wanted = true
			s.mu.Unlock()
			return inst
		}
	}
	info, err := s.advertised(ctx, e)
	if err != nil {
		s.h.log.Error("on-demand plugin cannot be advertised", "plugin", e.Name, "error", err)
		gone := s.h.catalog.withdraw(e.Name)
		if len(gone) > 0 {
			s.h.changed()
		}
		health := HealthDown
		var refused *RefusedError
		if errors.As(err, &refused) {
			health = HealthRefused
		}
		s.update(func(st *PluginStatus) {
			st.Health, st.Error, st.Capabilities, st.Pid, st.Launched = health, err.Error(), []string{}, 0, false
		})
	} else {
		caps := info.GetCapabilities()
		conflicts := s.h.catalog.publish(e.Name, 0, caps, nil)
		s.update(func(st *PluginStatus) {
			st.Health, st.Capabilities, st.Pid, st.Launched, st.RunningSHA256 = HealthIdle, s.served(e.Name, caps), 0, false, ""
			st.Kind, st.Version, st.Description, st.APIVersions = info.GetKind(), info.GetPluginVersion(), info.GetDescription(), info.GetApiVersions()
			st.APIVersion = 0 // negotiated when it starts
			if len(conflicts) > 0 {
				st.Error = fmt.Sprintf("capabilities already served by another plugin: %v", conflicts)
			}
		})
		s.h.changed()
	}
	s.first()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changed:
			return nil
		case <-s.wake:
			if s.isWanted() { // not a stale wake from a start that failed
				return nil
			}
		}
	}
}

// advertised returns the Info of e's binary (its capabilities sorted),
// read once per digest (Host.advertised). While it is read the status
// says starting, so a status saying idle means the advertised set is this
// entry's.
func (s *supervisor) advertised(ctx context.Context, e Entry) (*pluginv1.InfoResponse, error) {
	s.mu.Lock()
	digest, info := s.adDigest, s.adInfo
	s.mu.Unlock()
	if digest == e.SHA256 {
		return info, nil
	}
	s.update(func(st *PluginStatus) { st.Health = HealthStarting })
	info, err := s.h.advertised(ctx, e)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.adDigest, s.adInfo = e.SHA256, info
	s.mu.Unlock()
	return info, nil
}

// served are those of caps the catalog gives to plugin.
func (s *supervisor) served(plugin string, caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		if p, err := s.h.catalog.Lookup(c); err == nil && p.Plugin == plugin {
			out = append(out, c)
		}
	}
	return out
}

func (s *supervisor) connect(ctx context.Context, e Entry) (*instance, error) {
	if e.Lifecycle == LifecycleLongLived {
		return s.h.attachLongLived(ctx, e)
	}
	return s.h.startManaged(ctx, e)
}

// publish records the instance and adds its capabilities to the catalog.
func (s *supervisor) publish(e Entry, inst *instance) {
	caps := inst.capabilities()
	conflicts := s.h.catalog.publish(e.Name, inst.api, caps, inst.conn)
	served := s.served(e.Name, caps)
	s.mu.Lock()
	s.inst = inst
	s.mu.Unlock()
	s.update(func(st *PluginStatus) {
		st.Health, st.Error = HealthHealthy, ""
		if len(conflicts) > 0 {
			st.Error = fmt.Sprintf("capabilities already served by another plugin: %v", conflicts)
		}
		st.Kind, st.Version, st.Description = inst.info.GetKind(), inst.info.GetPluginVersion(), inst.info.GetDescription()
		st.APIVersions, st.APIVersion = inst.info.GetApiVersions(), inst.api
		st.Capabilities, st.Pid, st.Launched = served, inst.pid, inst.launched
		st.StoreEventsDropped = inst.info.GetStoreEventsDropped()
		st.RefusedContainerRows = inst.info.GetRefusedContainerRows()
		st.RunningSHA256 = ""
		if inst.running != "" && inst.running != e.SHA256 {
			st.RunningSHA256 = inst.running
		}
	})
	s.h.changed()
}

// reconfigure sends the current configuration to the connected plugin.
func (s *supervisor) reconfigure(ctx context.Context) error {
	s.mu.Lock()
	inst, e := s.inst, s.e
	s.mu.Unlock()
	if inst == nil {
		return nil // sent at the next attach
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := pluginv1.NewPluginClient(inst.conn).Configure(cctx,
		&pluginv1.ConfigureRequest{ApiVersion: inst.api, Config: s.h.configFor(e)})
	if err != nil {
		return fmt.Errorf("plugin %q: Configure: %w", e.Name, err)
	}
	return nil
}

// watch returns why the plugin stopped being healthy, or when ctx ends.
// Process death counts at once: the watch wakes when the connection
// leaves READY (the process's socket closed) and sees the exit go-plugin
// recorded (a pidfd for an attached process). At rest it checks health
// every HealthInterval; checks must fail twice in a row (the second
// failedRecheck after the first) so one slow answer does not restart a
// busy plugin. A changed manifest entry ends a managed plugin (it
// restarts on the new binary) and makes a long-lived one switch
// (switchLongLived).
func (s *supervisor) watch(ctx context.Context, inst *instance) string {
	hc := grpc_health_v1.NewHealthClient(inst.conn)
	interval := s.h.cfg.HealthInterval
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	dropped := connDropped(wctx, inst.conn)
	t := time.NewTimer(interval)
	defer t.Stop()
	failures := 0
	s.switchLongLived(ctx, inst)
	for {
		select {
		case <-ctx.Done():
			return "host stopping"
		case <-s.changed:
			if !inst.longLived {
				return "manifest entry changed"
			}
			s.switchLongLived(ctx, inst)
			continue
		case <-dropped:
			// The exit, if that is what dropped it, is recorded a moment
			// after the socket closed: give go-plugin that moment.
			exitSettles(inst)
			t.Stop()
		case <-t.C:
		}
		if inst.client.Exited() {
			return fmt.Sprintf("process %d exited", inst.pid)
		}
		cctx, cancel := context.WithTimeout(ctx, min(max(interval, time.Second), healthTimeout))
		resp, err := hc.Check(cctx, &grpc_health_v1.HealthCheckRequest{Service: healthService})
		cancel()
		if ctx.Err() != nil {
			return "host stopping"
		}
		next := interval
		switch {
		case err != nil:
			failures++
			if failures >= 2 {
				return fmt.Sprintf("health check failed: %v", err)
			}
			next = min(interval, failedRecheck)
		case resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING:
			return fmt.Sprintf("health status %s", resp.GetStatus())
		default:
			failures = 0
			s.refreshInfo(ctx, inst, interval)
		}
		t.Reset(next)
	}
}

// connDropped receives (coalesced) whenever conn leaves READY, until ctx
// ends: a plugin's process that exits closes its end, so the watch need
// not poll to learn of it.
func connDropped(ctx context.Context, conn *grpc.ClientConn) <-chan struct{} {
	c := make(chan struct{}, 1)
	go func() {
		st := conn.GetState()
		for conn.WaitForStateChange(ctx, st) {
			if st = conn.GetState(); st != connectivity.Ready {
				select {
				case c <- struct{}{}:
				default:
				}
			}
		}
	}()
	return c
}

// exitSettles waits up to exitGrace for go-plugin to record the exit of
// inst's process (it does so when its Wait returns, just after the
// socket closed); it returns early once recorded.
func exitSettles(inst *instance) {
	for deadline := time.Now().Add(exitGrace); !inst.client.Exited() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// exitGrace bounds exitSettles.
const exitGrace = 200 * time.Millisecond

// refreshInfo asks a healthy plugin's Info again for what changes while it
// runs (its dropped store events); a failed answer keeps the last one, the
// health check alone judges the plugin.
func (s *supervisor) refreshInfo(ctx context.Context, inst *instance, interval time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, min(max(interval, time.Second), healthTimeout))
	defer cancel()
	info, err := pluginv1.NewPluginClient(inst.conn).Info(cctx, &pluginv1.InfoRequest{})
	if err != nil {
		return
	}
	s.update(func(st *PluginStatus) {
		st.StoreEventsDropped, st.RefusedContainerRows = info.GetStoreEventsDropped(), info.GetRefusedContainerRows()
	})
}

// switchLongLived moves a long-lived plugin whose process runs another
// binary than the manifest installed onto the installed one: the installed
// blob is verified first, and only then is its unit restarted (the socket
// parked in the fd store queues traffic meanwhile). A blob that does not
// verify is refused, naming both digests, and the running process keeps
// serving. Without Units the difference is only reported.
func (s *supervisor) switchLongLived(ctx context.Context, inst *instance) {
	e := s.entry()
	if !inst.longLived || inst.running == "" || inst.running == e.SHA256 {
		s.mu.Lock()
		msg := s.switchErr
		s.switching, s.switchErr = "", ""
		s.mu.Unlock()
		s.update(func(st *PluginStatus) {
			st.RunningSHA256, st.SwitchError = "", ""
			if msg != "" && st.Error == msg {
				st.Error = "" // the refused install was replaced
			}
		})
		return
	}
	s.update(func(st *PluginStatus) { st.RunningSHA256 = inst.running })
	key := inst.running + "→" + e.SHA256
	s.mu.Lock()
	tried, msg := s.switching == key, s.switchErr
	if !tried {
		s.switching, s.switchErr = key, ""
	}
	s.mu.Unlock()
	if tried {
		if msg != "" {
			s.update(func(st *PluginStatus) { st.Error, st.SwitchError = msg, msg })
		}
		return
	}
	if s.h.cfg.Units == nil {
		return
	}
	log := s.h.log.With("plugin", e.Name, "running_sha256", inst.running, "installed_sha256", e.SHA256)
	if err := VerifyInstalled(s.h.cfg.Dir, e.Name, e.SHA256); err != nil {
		msg := fmt.Sprintf("upgrade refused: %v; the running binary (sha256 %s) keeps serving", err, inst.running)
		log.Error("installed binary does not verify; not restarting onto it", "error", err)
		s.mu.Lock()
		s.switchErr = msg
		s.mu.Unlock()
		s.update(func(st *PluginStatus) { st.Error, st.SwitchError = msg, msg })
		return
	}
	if inst.handoff && inst.pid > 0 {
		// The process starts its successor on its sockets and stops only
		// once that one serves (sdk.HandoffSignal); the watch sees it go and
		// attaches to the successor. A successor that fails leaves it serving.
		log.Info("asking the plugin to hand over to the installed binary", "pid", inst.pid)
		report := sdk.HandoffReportPath(s.h.socketFor(e))
		_ = os.Remove(report) // a report from an earlier handoff is not this one's
		err := syscall.Kill(inst.pid, sdk.HandoffSignal)
		if err == nil {
			go s.awaitHandoff(ctx, inst, key, report, log)
			return
		}
		log.Warn("handoff signal failed; restarting the unit instead", "pid", inst.pid, "error", err)
	}
	log.Info("restarting the plugin's unit onto the installed binary", "unit", UnitName(e.Name))
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := s.h.cfg.Units.Restart(rctx, UnitName(e.Name)); err != nil {
		log.Error("restart onto the installed binary failed", "error", err)
		s.update(func(st *PluginStatus) { st.Error = fmt.Sprintf("restart onto sha256 %s: %v", e.SHA256, err) })
	}
}

// awaitHandoff watches a handoff it asked for until the process is gone
// (the successor took over; the watch attaches to it) or the process
// reports the successor failed (sdk.HandoffReport): then the failure is
// the plugin's SwitchError at once, so an upgrade waiting for the new
// binary rolls back now instead of at its timeout. The process keeps
// serving on its binary either way.
func (s *supervisor) awaitHandoff(ctx context.Context, inst *instance, key, report string, log hclog.Logger) {
	deadline := time.Now().Add(sdk.HandoffTimeout + 15*time.Second)
	for time.Now().Before(deadline) && !inst.client.Exited() {
		rep, err := sdk.ReadHandoffReport(report)
		if err == nil && rep.Pid == inst.pid {
			msg := fmt.Sprintf("handoff to the installed binary failed: %s; the running binary (sha256 %s) keeps serving", rep.Error, inst.running)
			log.Error("plugin reports its handoff failed", "error", rep.Error, "binary", rep.Binary)
			s.mu.Lock()
			current := s.switching == key
			if current {
				s.switchErr = msg
			}
			s.mu.Unlock()
			if current {
				s.update(func(st *PluginStatus) { st.Error, st.SwitchError = msg, msg })
			}
			return
		}
		if !sleep(ctx, handoffPoll) {
			return
		}
	}
}

// handoffPoll paces awaitHandoff's look at the report.
const handoffPoll = 100 * time.Millisecond

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
