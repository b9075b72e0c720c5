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
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"

	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp"   // the http app
	_ "github.com/caddyserver/caddy/v2/modules/filestorage" // file_system storage
	"github.com/hashicorp/go-hclog"
	_ "github.com/mholt/caddy-l4/modules/l4proxy" // the layer4 app, proxy, first (tcp routes)
	"github.com/ployz/ployz/internal/fsutil"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/acme"
	"github.com/ployz/ployz/plugins/ingress-caddy/internal/caddyconfig"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// Loader timing: a Source that is a Watcher (the store) is read when it
// reports a change and at least every SafetyPoll; another is read every
// PollInterval. Failures back off from 250 ms to 2 s while the loaded
// config keeps serving. The spec file is checked when inotify reports a
// change to it, at every round, and every specCheck where inotify is
// unavailable. The status file is rewritten on every change and at least every
// statusRefresh.
const (
	PollInterval  = 500 * time.Millisecond
	minBackoff    = 250 * time.Millisecond
	maxBackoff    = 2 * time.Second
	statusRefresh = 5 * time.Second
	// streamsGrace is the end of drainTimeout left to the WebSockets,
	// event streams and gRPC calls ended at exit to close.
	streamsGrace = 2 * time.Second
)

// specCheck is how often the spec file is read where inotify is
// unavailable (a variable for tests).
var specCheck = time.Second

// drainTimeout bounds the wait for requests in flight at exit (the
// unit's TimeoutStopSec is 15 s; a variable for tests).
var drainTimeout = 10 * time.Second

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
// Container addresses outside the spec's Cluster network are refused, and
// so are those whose owner ployzd's trust list (trusted_machines_file)
// does not hold with the subnet the store says.
type StoreSource struct {
	tf     *store.TokenFileClient
	bounds serving.Bounds
}

// NewStoreSource returns the store Source of spec s.
func NewStoreSource(s ingress.Spec) StoreSource {
	return StoreSource{store.NewTokenFileClient(s.StoreAPI, s.StoreTokenFile),
		serving.Bounds{Network: s.NetworkPrefix(), TrustedFile: s.TrustedMachinesFile}}
}

// Input implements Source.
func (s StoreSource) Input(ctx context.Context) (ingress.Input, error) {
	var in ingress.Input
	r, err := serving.Read(ctx, s.tf, s.bounds)
	in.Containers, in.Pointers, in.Machines = r.Containers, r.Pointers, r.Machines
	return in, err
}

// Ack implements Source: the Machine's serving_acks row.
func (s StoreSource) Ack(ctx context.Context, machine string, ack store.ServingAckBody) error {
	return s.tf.PutServingAck(ctx, store.Row[store.ServingAckBody]{Key: machine, Owner: machine, Body: ack})
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
	OnLoad func(ingress.Status)
	// ACME adjusts the ACME manager's config before it starts (tests:
	// an in-memory store, no hostname check).
	ACME func(*acme.Config)
}

// Serve keeps an embedded Caddy loaded with the routes the store derives
// until ctx ends or the spec file changes. Nothing listens before the
// first successful store read; a failed read keeps the loaded config.
func Serve(ctx context.Context, o Options) error {
	l, err := newLoader(ctx, o)
	if err != nil {
		return err
	}
	defer l.stop()
	// Deferred after stop, so it runs before it: stop's lame duck is
	// longer once a handoff's successor serves the sockets.
	defer func() { successorServes.Store(sdk.HandedOver(ctx)) }()
	l.log.Info("waiting for the first load from the store", "machine", l.spec.Machine, "listen", l.spec.Listen)
	for ctx.Err() == nil {
		if now, err := os.ReadFile(o.SpecPath); err == nil && !bytes.Equal(now, l.raw) {
			return ErrSpecChanged
		}
		wait, err := l.round(ctx)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
		if err := l.wait(ctx, wait); err != nil {
			return err
		}
	}
	return nil
}

// loader is one Serve: what Caddy runs, the routes it was computed from,
// and the status file that reports both.
type loader struct {
	o         Options
	log       hclog.Logger
	spec      ingress.Spec
	raw       []byte // the spec file Serve started on
	src       Source
	interval  time.Duration
	changed   <-chan struct{} // the store's change notifications (nil: poll)
	specEvent <-chan struct{} // the spec file may have changed (watchSpec)
	stopSpec  context.CancelFunc
	certs     *certificates
	stopWatch context.CancelFunc

	running     bool           // Caddy serves (a config was loaded)
	loaded      []byte         // the config Caddy runs
	cur         ingress.Routes // the routes it was computed from
	st          ingress.Status
	written     ingress.Status
	writtenAt   time.Time
	backoff     time.Duration
	failing     bool
	lastLoadErr string
	acked       map[string]string // pointers in this Machine's ack row
	toAck       map[string]string // pointers the routing table follows, acked once drained
	ackDue      bool
	drains      drains // retired tables with requests in flight (drain.go)
	ages        serving.Ages
	reloads     int    // Caddy loads after the first
	caddyListen string // bound on the first load, which follows the first store read
	tlsListen   string // the HTTPS socket, bound when HTTPS is first served
	creds       *credentials
}

func newLoader(ctx context.Context, o Options) (*loader, error) {
	l := &loader{o: o, log: o.Log, src: o.Source, interval: o.Interval, backoff: minBackoff, stopWatch: func() {}}
	if l.log == nil {
		l.log = hclog.NewNullLogger()
	}
	healthLog.Store(&l.log)
	var err error
	if l.spec, l.raw, err = ingress.LoadSpec(o.SpecPath); err != nil {
		return nil, err
	}
	l.st = ingress.Status{MachineID: l.spec.Machine, Listen: l.spec.Listen}
	if l.src == nil {
		l.src = NewStoreSource(l.spec)
	}
	if w, ok := l.src.(Watcher); ok {
		var wctx context.Context
		wctx, l.stopWatch = context.WithCancel(ctx) // Serve may end before ctx
		l.changed = w.Watch(wctx, l.log)
		if l.interval <= 0 {
			l.interval = SafetyPoll
		}
	}
	if l.interval <= 0 {
		l.interval = PollInterval
	}
	if l.certs, err = startCertificates(ctx, l.spec, nil, l.log, o.ACME); err != nil { // nil: HTTPS off
		l.stopWatch()
		return nil, err
	}
	if l.creds, err = loadCredentials(l.spec); err != nil {
		l.stopWatch()
		l.certs.stop()
		return nil, err
	}
	var sctx context.Context
	sctx, l.stopSpec = context.WithCancel(ctx)
	l.specEvent = watchSpec(sctx, o.SpecPath, l.log)
	return l, nil
}

// stop stops Caddy and waits for the requests in flight.
func (l *loader) stop() {
	defer l.stopWatch()
	defer l.stopSpec()
	defer l.certs.stop()
	if l.running {
		defer lameDuckPause()() // reopened for a next Serve in this process (tests)
	}
	if err := caddy.Stop(); err != nil {
		l.log.Warn("stop caddy", "error", err)
	}
	// Stop only began the graceful shutdown: let every request in
	// flight finish before the process exits, then end the long-lived
	// streams still open cleanly (streams.go) rather than with the
	// process.
	n := waitConns(drainTimeout - streamsGrace)
	if n > 0 {
		if ended := retireStreams(func(*stream) bool { return true }); ended > 0 {
			l.log.Info("ending the streams still open", "streams", ended)
			n = waitConns(streamsGrace)
		}
	}
	if n > 0 {
		l.log.Warn("connections still open after the drain timeout", "open", n, "timeout", drainTimeout)
	}
}

// round reads the store once and applies what it says; it returns how
// long to wait for a change before the next round.
func (l *loader) round(ctx context.Context) (time.Duration, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	in, err := l.src.Input(lctx)
	cancel()
	wait := l.interval
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		wait = l.readFailed(err)
	} else if wait, err = l.apply(ctx, in, wait); err != nil {
		return 0, err
	}
	if l.failing && l.loaded != nil {
		l.writeStatus()
	}
	if hold := l.ages.HoldEnds(time.Now()); hold > 0 && !l.failing {
		wait = min(wait, hold+10*time.Millisecond) // a held pointer is let go on time
	}
	return wait, nil
}

// readFailed keeps the loaded config and backs off.
func (l *loader) readFailed(err error) time.Duration {
	if !l.failing {
		l.log.Warn("store unreachable; keeping the loaded config", "loaded", l.loaded != nil, "error", err)
	}
	l.failing = true
	l.st.StoreError = err.Error()
	wait := l.backoff
	l.backoff = min(l.backoff*2, maxBackoff)
	return wait
}

// apply computes the routes of in, swaps the routing table, loads Caddy
// when its listeners or certificates changed, acks the pointers Caddy
// follows and writes the status file.
func (l *loader) apply(ctx context.Context, in ingress.Input, wait time.Duration) (time.Duration, error) {
	if l.failing {
		l.log.Info("store reachable again")
	}
	l.failing, l.backoff = false, minBackoff
	l.st.StoreError = ""
	l.st.Checked = time.Now().Unix()
	in.Machine, in.Prev = l.spec.Machine, l.cur.ByKey()
	in.Young = l.ages.Young(in.Pointers, time.Now())
	if l.caddyListen == "" {
		l.caddyListen = httpListen(l.spec.Listen, l.log)
	}
	in.Containers = l.creds.open(in.Containers, l.log)
	next := ingress.Compute(in)
	dropBusyPorts(next.Routes, l.spec.Listen, l.cur)
	tlsIn := l.tls(ctx, next.Routes)
	// Routing changes swap the table in place; only listeners and
	// certificates change Caddy's config.
	built := buildTable(next.Routes, tlsIn)
	l.drains.add(newDrain(publish(built), built, time.Now()), l.log)
	cfg, err := caddyconfig.CaddyConfigTLS(l.caddyListen, l.spec.Machine, l.spec.StateDir, next.Routes, tlsIn)
	if err != nil {
		return 0, fmt.Errorf("generate caddy config: %w", err)
	}
	if !bytes.Equal(cfg, l.loaded) && !l.load(cfg) {
		wait = max(wait, time.Second)
	}
	applied := bytes.Equal(cfg, l.loaded)
	if applied {
		l.cur = next
		l.st.Routes = statusRoutes(next.Routes)
		if h := appliedHash(cfg, next.Routes, tlsIn.Challenges); h != l.st.ConfigHash {
			l.st.ConfigHash, l.st.Loaded = h, time.Now().Unix()
			l.log.Debug("routes applied", "routes", len(next.Routes), "hash", h)
		}
	}
	l.st.Skipped = next.Skipped
	serving.SetRefused(next.Refused)
	l.certs.status(&l.st)
	if applied {
		// Caddy runs exactly this computation: ack its pointers.
		l.st.Pointers = next.Pointers
		l.toAck, l.ackDue = next.Pointers, true
		l.ackDrained(ctx)
	}
	// Caddy may refuse even the first config (e.g. the port is taken):
	// the status file says so, with Running false.
	l.st.Running = l.loaded != nil
	l.writeStatus()
	if l.loaded != nil && l.o.OnLoad != nil && l.st.LoadError == "" {
		l.o.OnLoad(l.st)
	}
	return wait, nil
}

// tls is the TLS input for routes: certificates loaded first on the
// first load, and the HTTPS socket bound (and parked) once HTTPS is
// served.
func (l *loader) tls(ctx context.Context, routes []ingress.Route) caddyconfig.TLS {
	tlsIn := l.certs.tls(routes)
	if l.loaded == nil && l.certs != nil {
		l.certs.refresh(ctx) // the hostnames are wanted now: load their certificates first
		tlsIn = l.certs.tls(routes)
	}
	if tlsIn.Listen != "" && (len(tlsIn.Certificates) > 0 || len(tlsIn.OnDemand) > 0) {
		if l.tlsListen == "" {
			l.tlsListen = parkedListen(FDNameHTTPS, tlsIn.Listen, l.log)
		}
		tlsIn.HTTPSPort = listenPort(l.spec.ListenTLS)
		tlsIn.Listen = l.tlsListen
	}
	return tlsIn
}

// load hands cfg to Caddy (after a lame duck pause when servers run);
// false when Caddy refused it and keeps the loaded one.
func (l *loader) load(cfg []byte) bool {
	reopen := func() {}
	if l.loaded != nil {
		reopen = lameDuckPause() // the old servers close their idle connections
	}
	err := caddy.Load(cfg, false)
	reopen()
	if err != nil {
		if err.Error() != l.lastLoadErr {
			l.log.Error("caddy refused the config; keeping the loaded one", "error", err)
		}
		l.lastLoadErr = err.Error()
		l.st.LoadError = err.Error()
		return false
	}
	if l.loaded != nil {
		l.reloads++
	}
	caddyLoads.Add(1)
	if l.loaded == nil && l.tlsListen == "" {
		dropInherited(FDNameHTTPS) // parked by a process that served HTTPS
	}
	l.running = true
	sdk.DataPlaneServing() // a handoff's old process may stop now
	l.log.Info("caddy config loaded", "first", l.loaded == nil, "reloads", l.reloads)
	l.loaded, l.lastLoadErr = cfg, ""
	l.st.LoadError = ""
	return true
}

// writeStatus rewrites the status file when the status changed, and at
// least every statusRefresh.
func (l *loader) writeStatus() {
	cmp := l.st
	cmp.Checked = l.written.Checked
	if reflect.DeepEqual(cmp, l.written) && time.Since(l.writtenAt) < statusRefresh {
		return
	}
	b, _ := json.MarshalIndent(l.st, "", "  ")
	if err := fsutil.WriteFileAtomic(l.spec.StatusFile, append(b, '\n'), 0o644); err != nil {
		l.log.Warn("write status", "path", l.spec.StatusFile, "error", err)
		return
	}
	l.written, l.writtenAt = l.st, time.Now()
}

// waitChange waits for wait, a change (changed, certs) or ctx's end;
// at every spec event it checks the spec file and returns ErrSpecChanged
// when it changed from raw. It reports whether anything but the timer
// ended the wait.
func waitChange(ctx context.Context, wait time.Duration, changed, certs <-chan struct{}, spec <-chan struct{}, path string, raw []byte) (bool, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case <-timer.C:
			return false, nil
		case <-changed:
			return true, nil
		case <-certs:
			return true, nil
		case <-spec:
			if now, err := os.ReadFile(path); err == nil && !bytes.Equal(now, raw) {
				return true, ErrSpecChanged
			}
		}
	}
}

// ackDrained acks the pointers the routing table follows once no
// request is left on a route they changed (drain.go).
func (l *loader) ackDrained(ctx context.Context) {
	if !l.ackDue || l.drains.pending(time.Now(), l.log) {
		return
	}
	l.acked = ack(ctx, l.src, l.spec.Machine, l.toAck, l.acked, l.log)
	l.ackDue = !maps.Equal(l.acked, l.toAck)
}

// wait waits up to d for a change, acking meanwhile once the retired
// tables drain.
func (l *loader) wait(ctx context.Context, d time.Duration) error {
	until := time.Now().Add(d)
	for {
		step := time.Until(until)
		polling := l.ackDue && l.drains.pending(time.Now(), l.log)
		if polling {
			step = min(step, drainPoll)
		}
		woke, err := waitChange(ctx, step, l.changed, l.certs.changed(), l.specEvent, l.o.SpecPath, l.raw)
		if err != nil || woke || !polling || !time.Now().Before(until) {
			return err
		}
		l.ackDrained(ctx)
	}
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

// listenPort is the port of a [host]:port listen address (ParseSpec
// checked it), 0 when it has none.
func listenPort(listen string) int {
	_, p, err := net.SplitHostPort(listen)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// statusRoutes are routes as the status file shows them: basic
// authentication's user names without their hashes.
func statusRoutes(routes []ingress.Route) []ingress.Route {
	out := slices.Clone(routes)
	for i := range out {
		out[i].BasicAuth = out[i].BasicAuth.Redacted()
	}
	return out
}

// watchSpec reports on the channel when the spec file at path may have
// changed, until ctx ends: by inotify on its directory (the process
// sleeps at rest; it checked the file every second before), or, where
// inotify is unavailable or lost events, every specCheck. Serve also
// reads the file at every round (at least every SafetyPoll), the safety
// net should an event be missed.
func watchSpec(ctx context.Context, path string, log hclog.Logger) <-chan struct{} {
	c := make(chan struct{}, 1)
	poke := func() {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	go func() {
		if fsutil.FollowFile(ctx, path, poke) {
			return
		}
		log.Debug("no inotify on the spec file's directory; checking it every second", "path", path)
		t := time.NewTicker(specCheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				poke()
			}
		}
	}()
	return c
}
