package dns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

// Capability is advertised in Info once a process really serves DNS.
const Capability = "ployz.dns.serve.v1"

// Main is the ployz-dns command line; it returns the exit status.
//
//	ployz-dns serve-dns [--spec PATH] [--socket PATH]   serve the spec (the runtime unit runs this)
//	ployz-dns --probe [--spec PATH]                     exit 0 only when this binary can serve
//	ployz-dns query-loop --server ADDR --name NAME      debug: a resolver-like query loop, JSON result
//	ployz-dns lookup --server ADDR NAME                 debug: print the rcode and A answers in order
//	ployz-dns info | serve | --version                  the SDK's plugin modes
func Main(version string, args []string, stdout, stderr io.Writer) int {
	p := Plugin(version, nil)
	if len(args) == 0 {
		sdk.Main(p) // managed mode: Info and Configure only, no DNS served
		return 0
	}
	switch args[0] {
	case "--probe", "probe":
		fs := flag.NewFlagSet("probe", flag.ContinueOnError)
		spec := fs.String("spec", "", "also validate this spec")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := Probe(ctx, *spec); err != nil {
			fmt.Fprintln(stderr, "ployz-dns cannot serve:", err)
			return 1
		}
		return 0
	case "serve-dns":
		return serveDNS(version, args[1:], stderr)
	case "query-loop":
		return queryLoop(args[1:], stdout, stderr)
	case "lookup":
		return lookup(args[1:], stdout, stderr)
	case "info":
		p = Plugin(version, &Status{}) // what this binary serves under serve-dns
	}
	sdk.Main(p)
	return 0
}

// Plugin describes ployz-dns to the SDK; a non-nil s serves the DNS kind
// service's Status from that handler and advertises Capability.
func Plugin(version string, s *Status) *sdk.Plugin {
	p := &sdk.Plugin{
		Name:        "dns",
		Kind:        sdk.KindDNS,
		Version:     version,
		Description: "Internal DNS: answers <service>.<namespace>.internal names from the store, forwards the rest.",
	}
	if s != nil {
		p.Capabilities = []string{Capability}
		p.Register = func(g *grpc.Server) { dnsv1.RegisterDNSServer(g, s) }
	}
	return p
}

// Status serves the DNS kind service for a serving process. The spec comes
// from dns.json only, so ApplySpec is refused.
type Status struct {
	dnsv1.UnimplementedDNSServer
	H      *Handler
	Listen string
	mu     sync.Mutex
	Digest string
}

// ApplySpec implements dnsv1.DNSServer.
func (s *Status) ApplySpec(context.Context, *dnsv1.ApplySpecRequest) (*dnsv1.ApplySpecResponse, error) {
	return nil, status.Error(codes.FailedPrecondition, "ployz-dns serves /run/ployz/dns.json, which only the daemon writes")
}

// Status implements dnsv1.DNSServer.
func (s *Status) Status(context.Context, *dnsv1.StatusRequest) (*dnsv1.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &dnsv1.StatusResponse{Serving: s.H != nil && s.H.Loaded(), SpecSha256: s.Digest, ListenAddrs: []string{s.Listen}}, nil
}

func serveDNS(version string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve-dns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("spec", dnsspec.DefaultSpecPath, "the dns.json spec the daemon publishes")
	socket := fs.String("socket", sdk.DefaultSocket("dns"), "plugin socket served once DNS answers; empty for none")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := sdk.NewLogger("dns")
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	bin, _ := os.Executable()
	if len(os.Args) > 0 && filepath.IsAbs(os.Args[0]) {
		bin = os.Args[0] // the path the unit runs, which an upgrade replaces
	}
	var wg sync.WaitGroup
	defer waitAtMost(&wg, time.Second) // DNS has stopped; the plugin socket only drains
	err := Serve(ctx, Options{SpecPath: *spec, Binary: bin, Log: log, OnServing: func(h *Handler) {
		if *socket == "" {
			return
		}
		raw, _ := os.ReadFile(*spec)
		sum := sha256.Sum256(raw)
		cfg, _ := dnsspec.ParseSpec(raw)
		st := &Status{H: h, Listen: cfg.Listen, Digest: hex.EncodeToString(sum[:])}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sdk.ServeLongLived(ctx, Plugin(version, st), *socket, log.Named("plugin")); err != nil {
				log.Warn("plugin socket not served; DNS keeps answering", "socket", *socket, "error", err)
			}
		}()
	}})
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrSpecChanged):
		log.Info(err.Error())
		return 0
	case errors.Is(err, ErrCannotServe):
		return ExitCannotServe
	default:
		log.Error("dns", "error", err)
		return 1
	}
}

func queryLoop(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("query-loop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "resolver ip:port")
	name := fs.String("name", "", "name to query (A)")
	count := fs.Int("count", 1000, "queries to send")
	attempts := fs.Int("attempts", 3, "tries per query, as a stub resolver makes")
	timeout := fs.Duration("timeout", 2*time.Second, "timeout per try")
	interval := fs.Duration("interval", 0, "pause between queries")
	if err := fs.Parse(args); err != nil || *server == "" || *name == "" {
		fmt.Fprintln(stderr, "usage: ployz-dns query-loop --server ADDR --name NAME [--count N]")
		return 2
	}
	res := QueryLoop(context.Background(), *server, *name, *count, *attempts, *timeout, *interval)
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if res.Failed > 0 || res.Queries < *count {
		return 1
	}
	return 0
}

func lookup(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lookup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "resolver ip:port")
	if err := fs.Parse(args); err != nil || *server == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: ployz-dns lookup --server ADDR NAME")
		return 2
	}
	m := new(miekg.Msg)
	m.SetQuestion(miekg.Fqdn(fs.Arg(0)), miekg.TypeA)
	r, _, err := (&miekg.Client{Timeout: 2 * time.Second}).Exchange(m, *server)
	if err != nil {
		fmt.Fprintln(stderr, "lookup:", err)
		return 1
	}
	fmt.Fprintln(stdout, miekg.RcodeToString[r.Rcode])
	for _, rr := range r.Answer {
		if a, ok := rr.(*miekg.A); ok {
			fmt.Fprintln(stdout, a.A.String())
		}
	}
	return 0
}

// waitAtMost waits for wg, but no longer than d.
func waitAtMost(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
