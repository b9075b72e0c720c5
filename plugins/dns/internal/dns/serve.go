package dns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/fdstore"
)

// ExitCannotServe is the exit status after handing port 53 back because
// the installed binary cannot serve; the unit does not restart on it.
const ExitCannotServe = 78

// Errors that end Serve and tell the caller how to exit.
var (
	// ErrSpecChanged: the spec now names another listen address or store;
	// exit 0 and let systemd start a process on the new spec.
	ErrSpecChanged = errors.New("dns spec changed its listen address or store; restarting onto it")
	// ErrCannotServe: the binary on disk failed --probe; port 53 was handed
	// back, exit ExitCannotServe.
	ErrCannotServe = errors.New("the installed binary cannot serve DNS; handed port 53 back")
)

// Options tune Serve.
type Options struct {
	SpecPath string
	// Binary is the executable the unit runs; when it changes on disk Serve
	// runs "Binary --probe" and hands port 53 back if it fails. Empty skips.
	Binary string
	// OnServing runs once, after the first load from the store.
	OnServing func(*Handler)
	// Source overrides the store (tests); nil reads the spec's store.
	Source Source
	// Interval is the store poll interval while no subscription is live
	// (default PollInterval).
	Interval time.Duration
	Log      hclog.Logger
}

// Serve answers queries on the spec's listen address until ctx ends. A
// spec that does not validate is an error before anything is bound.
func Serve(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cfg, raw, err := dnsspec.LoadSpec(o.SpecPath)
	if err != nil {
		return err
	}
	socks, err := TakeSockets(cfg.ListenAddr, log)
	if err != nil {
		return err
	}
	defer socks.Close()
	h := NewHandler(cfg, log.Named("query"))
	qs := newQueryServers(socks, h)
	defer qs.stop()
	_ = fdstore.Notify("READY=1\nSTATUS=waiting for the first load from the store")
	log.Info("bound; answering after the first load", "addr", cfg.ListenAddr, "machine", cfg.Machine, "upstreams", cfg.Spec.Upstreams)

	src := o.Source
	if src == nil {
		src = NewStoreSource(cfg)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go Load(lctx, h, src, o.Interval, log.Named("load"), func() {
		qs.start()
		_ = fdstore.Notify("STATUS=serving")
		sdk.DataPlaneServing()
		if o.OnServing != nil {
			o.OnServing(h)
		}
	})

	specSt, _ := os.Stat(o.SpecPath)
	binSt := statOrNil(o.Binary)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping")
			return nil
		case err := <-qs.errc:
			return fmt.Errorf("dns server on %s: %w", cfg.ListenAddr, err)
		case <-tick.C:
		}
		if st, err := os.Stat(o.SpecPath); err == nil && changed(specSt, st) {
			specSt = st
			nc, nraw, err := dnsspec.LoadSpec(o.SpecPath)
			switch {
			case err != nil:
				log.Error("new spec does not validate; keeping the loaded one", "error", err)
			case bytes.Equal(nraw, raw):
			case nc.ListenAddr != cfg.ListenAddr || nc.StoreAPI != cfg.StoreAPI || nc.StoreTokenFile != cfg.StoreTokenFile:
				return ErrSpecChanged
			default:
				cfg, raw = nc, nraw
				h.SetConfig(nc)
				log.Info("spec reloaded", "machine", nc.Machine, "upstreams", nc.Spec.Upstreams)
			}
		}
		if st := statOrNil(o.Binary); st != nil && changed(binSt, st) {
			binSt = st
			if err := runProbe(ctx, o.Binary, o.SpecPath); err != nil {
				log.Error("installed binary cannot serve; handing port 53 back", "binary", o.Binary, "error", err)
				Release()
				return ErrCannotServe
			}
			log.Info("installed binary passed --probe; the daemon restarts onto it", "binary", o.Binary)
		}
	}
}

func statOrNil(path string) os.FileInfo {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return st
}

func changed(old, cur os.FileInfo) bool {
	return old == nil || !old.ModTime().Equal(cur.ModTime()) || old.Size() != cur.Size()
}

func runProbe(ctx context.Context, bin, spec string) error {
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(pctx, bin, "--probe", "--spec", spec).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --probe: %w: %s", bin, err, bytes.TrimSpace(out))
	}
	return nil
}

// queryServers read the sockets only from the first load on. A query that
// arrives earlier waits in the socket (which the fd store keeps across
// restarts) instead of being read and left unanswered: a restart delays
// queries, it never loses one.
type queryServers struct {
	servers  []queryServer
	up       []chan struct{} // closed once that server reads its socket
	done     []chan struct{} // closed once that server's loop returned
	errc     chan error
	once     sync.Once
	mu       sync.Mutex
	launched bool
	stopped  bool
}

// queryServer is a miekg server (TCP) or the hot-path udpServer.
type queryServer interface {
	ActivateAndServe() error
	ShutdownContext(context.Context) error
}

func newQueryServers(socks *Sockets, h *Handler) *queryServers {
	qs := &queryServers{errc: make(chan error, 2)}
	var notify []func(func()) // sets each server's started callback
	if udp, err := newUDPServer(socks.UDP, h); err == nil {
		qs.servers = append(qs.servers, udp)
		notify = append(notify, func(f func()) { udp.notify = f })
	} else { // not a UDP socket (never from TakeSockets): miekg reads it
		srv := &miekg.Server{PacketConn: socks.UDP, Handler: h, UDPSize: 4096}
		qs.servers = append(qs.servers, srv)
		notify = append(notify, func(f func()) { srv.NotifyStartedFunc = f })
	}
	tcp := &miekg.Server{Listener: socks.TCP, Handler: h, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	qs.servers = append(qs.servers, tcp)
	notify = append(notify, func(f func()) { tcp.NotifyStartedFunc = f })
	for i := range qs.servers {
		up := make(chan struct{})
		notify[i](func() { close(up) })
		qs.up = append(qs.up, up)
		qs.done = append(qs.done, make(chan struct{}))
	}
	return qs
}

// start begins answering, once; never after stop.
func (qs *queryServers) start() {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.stopped {
		return
	}
	qs.once.Do(func() {
		qs.launched = true
		for i, srv := range qs.servers {
			go func() {
				err := srv.ActivateAndServe()
				close(qs.done[i])
				qs.errc <- err
			}()
		}
	})
}

// stop shuts down the servers that started, letting queries already read
// be answered (bounded at 5 s).
func (qs *queryServers) stop() {
	qs.mu.Lock()
	qs.stopped = true
	launched := qs.launched
	qs.mu.Unlock()
	if !launched {
		return // nothing ever read the sockets
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, srv := range qs.servers {
		select {
		case <-qs.up[i]:
			_ = srv.ShutdownContext(ctx)
		case <-qs.done[i]: // failed to start: nothing reads its socket
		case <-ctx.Done():
		}
	}
}
