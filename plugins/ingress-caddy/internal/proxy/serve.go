// Package proxy runs Ployz's Ingress Proxy: an embedded Caddy loaded
// with the routes package ingress computes from the store.
package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"sync/atomic"

	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp"              // the http app
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy" // reverse_proxy, first
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"            // file_system storage
	"github.com/hashicorp/go-hclog"
	_ "github.com/mholt/caddy-l4/modules/l4proxy" // the layer4 app, proxy, first (tcp routes)
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
)

// Loader timing: a Source that is a Watcher (the store) is read when it
// reports a change and at least every SafetyPoll; another is read every
// PollInterval. Failures back off from 250 ms to 2 s while the loaded
// config keeps serving. The spec file is checked every specCheck. The
// status file is rewritten on every change and at least every
// statusRefresh.
const (
	PollInterval  = 500 * time.Millisecond
	specCheck     = time.Second
	minBackoff    = 250 * time.Millisecond
	maxBackoff    = 2 * time.Second
	statusRefresh = 5 * time.Second
	// drainTimeout bounds the wait for requests in flight at exit (the
	// unit's TimeoutStopSec is 15 s).
	drainTimeout = 10 * time.Second
)

// caddyLoads counts successful Caddy loads in this process (tests: a
// routing change must not add one).
var caddyLoads atomic.Int64

// ErrSpecChanged ends Serve when the spec file changed: exit 0 and let
// systemd start a process on the new spec.
var ErrSpecChanged = errors.New("ingress spec changed; restarting onto it")

// Source is what the proxy reads routes from and acks Serving Pointers
// to; StoreSource is the real one.
type Source interface {
	// Input reads the Containers, Serving Pointers and Machine sessions.
	Input(ctx context.Context) (ingress.Input, error)
	// Ack records which Serving Pointers machine's loaded config follows.
	Ack(ctx context.Context, machine string, ack store.ServingAckBody) error
}

// StoreSource reads the replicated store at the spec's store_api, with
// the token from its store_token_file.
type StoreSource struct{ tf *store.TokenFileClient }

// NewStoreSource returns the store Source of spec s.
func NewStoreSource(s ingress.Spec) StoreSource {
	return StoreSource{store.NewTokenFileClient(s.StoreAPI, s.StoreTokenFile)}
}

// Input implements Source.
func (s StoreSource) Input(ctx context.Context) (ingress.Input, error) {
	var in ingress.Input
	err := s.tf.Do(func(c *store.Client) error {
		var err error
		if in.Containers, err = c.Containers().List(ctx); err != nil {
			return err
		}
		if in.Pointers, err = c.Serving().List(ctx); err != nil {
			return err
		}
		ms, err := c.Machines().List(ctx)
		if err != nil {
			return err
		}
		in.Sessions = map[string]string{}
		for _, m := range ms {
			in.Sessions[m.Key] = m.Body.Session
		}
		return nil
	})
	return in, err
}

// Ack implements Source: the Machine's serving_acks row.
func (s StoreSource) Ack(ctx context.Context, machine string, ack store.ServingAckBody) error {
	return s.tf.Do(func(c *store.Client) error {
		_, err := c.ServingAcks().Put(ctx, store.Row[store.ServingAckBody]{Key: machine, Owner: machine, Body: ack})
		return err
	})
}

// Options tune Serve.
type Options struct {
	SpecPath string
	// Source overrides the store (tests); nil reads the spec's store.
	Source Source
	// Interval is the store poll interval (default SafetyPoll for a
	// Watcher, else PollInterval).
	Interval time.Duration
	Log      hclog.Logger
	// OnLoad runs after every successful Caddy load (tests).
	OnLoad func(rpc.IngressStatus)
}

// Serve keeps an embedded Caddy loaded with the routes the store derives
// until ctx ends or the spec file changes. Nothing listens before the
// first successful store read; a failed read keeps the loaded config.
func Serve(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	healthLog.Store(&log)
	spec, raw, err := ingress.LoadSpec(o.SpecPath)
	if err != nil {
		return err
	}
	src := o.Source
	if src == nil {
		src = NewStoreSource(spec)
	}
	interval := o.Interval
	var changed <-chan struct{}
	if w, ok := src.(Watcher); ok {
		wctx, stopWatch := context.WithCancel(ctx) // Serve may end before ctx
		defer stopWatch()
		changed = w.Watch(wctx, log)
		if interval <= 0 {
			interval = SafetyPoll
		}
	}
	if interval <= 0 {
		interval = PollInterval
	}
	specTick := time.NewTicker(specCheck)
	defer specTick.Stop()
	certs, err := startCertificates(ctx, spec, nil, log) // nil: HTTPS off
	if err != nil {
		return err
	}
	defer certs.stop()
	running := false // Caddy serves (a config was loaded)
	defer func() {
		if running {
			defer lameDuckPause()() // reopened for a next Serve in this process (tests)
		}
		if err := caddy.Stop(); err != nil {
			log.Warn("stop caddy", "error", err)
		}
		// Stop only began the graceful shutdown: let every request in
		// flight finish before the process exits.
		if n := waitConns(drainTimeout); n > 0 {
			log.Warn("connections still open after the drain timeout", "open", n, "timeout", drainTimeout)
		}
	}()
	var (
		loaded      []byte         // the config Caddy runs
		cur         ingress.Routes // the routes it was computed from
		st          = rpc.IngressStatus{MachineID: spec.Machine, Listen: spec.Listen}
		written     rpc.IngressStatus
		writtenAt   time.Time
		backoff     = minBackoff
		failing     bool
		lastLoadErr string
		acked       map[string]string        // pointers in this Machine's ack row
		firstSeen   = map[string]time.Time{} // Serving Pointer id -> first read
		reloads     int                      // Caddy loads after the first
	)
	writeStatus := func() {
		cmp := st
		cmp.Checked = written.Checked
		if reflect.DeepEqual(cmp, written) && time.Since(writtenAt) < statusRefresh {
			return
		}
		b, _ := json.MarshalIndent(st, "", "  ")
		if err := machine.WriteFileAtomic(spec.StatusFile, append(b, '\n'), 0o644); err != nil {
			log.Warn("write status", "path", spec.StatusFile, "error", err)
			return
		}
		written, writtenAt = st, time.Now()
	}
	log.Info("waiting for the first load from the store", "machine", spec.Machine, "listen", spec.Listen)
	caddyListen := "" // bound on the first load, which follows the first store read
	tlsListen := ""   // the HTTPS socket, bound when HTTPS is first served

	for ctx.Err() == nil {
		if now, err := os.ReadFile(o.SpecPath); err == nil && !bytes.Equal(now, raw) {
			return ErrSpecChanged
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		in, err := src.Input(lctx)
		cancel()
		wait := interval
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !failing {
				log.Warn("store unreachable; keeping the loaded config", "loaded", loaded != nil, "error", err)
			}
			failing = true
			st.StoreError = err.Error()
			wait, backoff = backoff, min(backoff*2, maxBackoff)
		} else {
			if failing {
				log.Info("store reachable again")
			}
			failing, backoff = false, minBackoff
			st.StoreError = ""
			st.Checked = time.Now().Unix()
			in.Machine, in.Prev, in.Young = spec.Machine, cur.ByKey(), map[string]bool{}
			for _, p := range in.Pointers {
				if _, ok := firstSeen[p.Body.ID]; !ok {
					firstSeen[p.Body.ID] = time.Now()
				}
				in.Young[p.Body.ID] = time.Since(firstSeen[p.Body.ID]) < ingress.HoldFor
			}
			for id := range firstSeen {
				if _, ok := in.Young[id]; !ok {
					delete(firstSeen, id) // moved on
				}
			}
			if caddyListen == "" {
				caddyListen = httpListen(spec.Listen, log)
			}
			next := ingress.Compute(in)
			dropBusyPorts(next.Routes, spec.Listen, cur)
			tlsIn := certs.tls(next.Routes)
			if loaded == nil && certs != nil {
				certs.refresh(ctx) // the hostnames are wanted now: load their certificates first
				tlsIn = certs.tls(next.Routes)
			}
			if tlsIn.Listen != "" && len(tlsIn.Certificates) > 0 {
				if tlsListen == "" { // bound (and parked) once HTTPS is served
					tlsListen = parkedListen(FDNameHTTPS, tlsIn.Listen, log)
				}
				tlsIn.Listen = tlsListen
			}
			// Routing changes swap the table in place; only listeners
			// and certificates change Caddy's config.
			publish(buildTable(next.Routes, tlsIn.Challenges))
			cfg, err := caddyconfig.CaddyConfigTLS(caddyListen, spec.Machine, spec.StateDir, next.Routes, tlsIn)
			if err != nil {
				return fmt.Errorf("generate caddy config: %w", err)
			}
			if !bytes.Equal(cfg, loaded) {
				reopen := func() {}
				if loaded != nil {
					reopen = lameDuckPause() // the old servers close their idle connections
				}
				err := caddy.Load(cfg, false)
				reopen()
				if err != nil {
					if err.Error() != lastLoadErr {
						log.Error("caddy refused the config; keeping the loaded one", "error", err)
					}
					lastLoadErr = err.Error()
					st.LoadError = err.Error()
					wait = max(wait, time.Second)
				} else {
					if loaded != nil {
						reloads++
					}
					caddyLoads.Add(1)
					if loaded == nil && tlsListen == "" {
						dropInherited(FDNameHTTPS) // parked by a process that served HTTPS
					}
					running = true
					log.Info("caddy config loaded", "first", loaded == nil, "reloads", reloads)
					loaded, lastLoadErr = cfg, ""
					st.LoadError = ""
				}
			}
			if bytes.Equal(cfg, loaded) {
				cur = next
				st.Routes = next.Routes
				if h := appliedHash(cfg, next.Routes, tlsIn.Challenges); h != st.ConfigHash {
					st.ConfigHash, st.Loaded = h, time.Now().Unix()
					log.Debug("routes applied", "routes", len(next.Routes), "hash", h)
				}
			}
			st.Skipped = next.Skipped
			certs.status(&st)
			if bytes.Equal(cfg, loaded) {
				// Caddy runs exactly this computation: ack its pointers.
				st.Pointers = next.Pointers
				acked = ack(ctx, src, spec.Machine, next.Pointers, acked, log)
			}
			// Caddy may refuse even the first config (e.g. the port is
			// taken): the status file says so, with Running false.
			st.Running = loaded != nil
			writeStatus()
			if loaded != nil && o.OnLoad != nil && st.LoadError == "" {
				o.OnLoad(st)
			}
		}
		if failing && loaded != nil {
			writeStatus()
		}
		if hold := holdEnds(firstSeen); hold > 0 && !failing {
			wait = min(wait, hold) // a held pointer is let go on time
		}
		if err := waitChange(ctx, wait, changed, certs.changed(), specTick.C, o.SpecPath, raw); err != nil {
			return err
		}
	}
	return nil
}

// waitChange waits for wait, a change (changed, certs) or ctx's end;
// every spec tick it checks the spec file and returns ErrSpecChanged
// when it changed from raw.
func waitChange(ctx context.Context, wait time.Duration, changed, certs <-chan struct{}, spec <-chan time.Time, path string, raw []byte) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			return nil
		case <-changed:
			return nil
		case <-certs:
			return nil
		case <-spec:
			if now, err := os.ReadFile(path); err == nil && !bytes.Equal(now, raw) {
				return ErrSpecChanged
			}
		}
	}
}

// holdEnds is how long until the first young Serving Pointer stops
// being young (ingress.HoldFor after it was first seen); 0 when none is.
func holdEnds(firstSeen map[string]time.Time) time.Duration {
	var next time.Duration
	for _, at := range firstSeen {
		if d := time.Until(at.Add(ingress.HoldFor)); d > 0 && (next == 0 || d < next) {
			next = d + 10*time.Millisecond
		}
	}
	return next
}

// ack writes this Machine's ack row when the pointers its loaded config
// follows differ from those acked; it returns what is acked now.
func ack(ctx context.Context, src Source, machine string, pointers, acked map[string]string, log hclog.Logger) map[string]string {
	if maps.Equal(pointers, acked) {
		return acked
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := src.Ack(ctx, machine, store.ServingAckBody{Pointers: pointers, Loaded: time.Now().UnixMilli()}); err != nil {
		log.Warn("ack serving pointers", "error", err)
		return acked
	}
	return pointers
}

// appliedHash identifies what the proxy serves: Caddy's config and the
// routing table's input.
func appliedHash(cfg []byte, routes []ingress.Route, challenges []caddyconfig.Challenge) string {
	h := sha256.New()
	h.Write(cfg)
	b, _ := json.Marshal(struct {
		R []ingress.Route
		C []caddyconfig.Challenge
	}{routes, challenges})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:8])
}
