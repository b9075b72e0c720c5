package dns

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/fdstore"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// Capability is advertised in Info by a process that serves DNS (`serve`).
const Capability = dnsspec.CapServe

// Main is the ployz-dns command line; it returns the exit status.
//
//	ployz-dns serve [--socket PATH] [--spec PATH]   long-lived plugin: ployz-plugin@dns.service runs this
//	ployz-dns --probe [--spec PATH]                 exit 0 only when this binary can serve
//	ployz-dns query-loop --server ADDR --name NAME  debug: a resolver-like query loop, JSON result
//	ployz-dns lookup --server ADDR NAME             debug: print the rcode and A answers in order
//	ployz-dns info | --version                      the SDK's plugin modes
func Main(version string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		sdk.Main(Plugin(version, nil)) // managed mode: Info and Configure only, no DNS served
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
	case "serve":
		return serveLongLived(version, args[1:], stderr)
	case "query-loop":
		return queryLoop(args[1:], stdout, stderr)
	case "lookup":
		return lookup(args[1:], stdout, stderr)
	}
	sdk.Main(Plugin(version, &Status{})) // info, --version: what `serve` advertises
	return 0
}

// Plugin describes ployz-dns to the SDK; a non-nil s serves the DNS kind
// service from that process, advertises Capability and takes its spec
// through Configure (the bytes of a dnsspec.Spec; empty keeps the last one).
func Plugin(version string, s *Status) *sdk.Plugin {
	p := &sdk.Plugin{
		Name:        "dns",
		Kind:        sdk.KindDNS,
		Version:     version,
		Description: "Internal DNS: answers <service>.<namespace>.internal names from the store, forwards the rest.",
		// The loader's store subscriptions (serving.Watch) count here.
		StoreEventsDropped: store.DroppedEvents,
		// Forged or stray containers rows the table does not answer.
		RefusedContainerRows: serving.RefusedRows,
	}
	if s != nil {
		p.Capabilities = []string{Capability}
		p.Register = func(g *grpc.Server) { dnsv1.RegisterDNSServer(g, s) }
		p.Configure = func(_ context.Context, _ uint32, config []byte) error {
			_, err := s.apply(config)
			return err
		}
	}
	return p
}

// Status serves the DNS kind service of a serving process.
type Status struct {
	dnsv1.UnimplementedDNSServer
	// SpecPath is where an applied spec is kept (dnsspec.DefaultSpecPath):
	// the DNS loop reloads from it, and a restart serves it at once.
	SpecPath string

	mu     sync.Mutex
	h      *Handler
	listen string
}

// apply validates spec and keeps it at SpecPath unless it is empty or
// unchanged; it returns the spec's sha256.
func (s *Status) apply(spec []byte) (string, error) {
	if len(bytes.TrimSpace(spec)) == 0 || string(bytes.TrimSpace(spec)) == "null" {
		return "", nil // a host with nothing to say (e.g. `ployzd plugins ls`)
	}
	if s.SpecPath == "" {
		return "", errors.New("this process serves no spec")
	}
	if _, err := dnsspec.ParseSpec(spec); err != nil {
		return "", err
	}
	sum := sha256.Sum256(spec)
	if _, err := sdk.KeepConfig(s.SpecPath, spec); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

// ApplySpec implements dnsv1.DNSServer: the same as Configure.
func (s *Status) ApplySpec(_ context.Context, req *dnsv1.ApplySpecRequest) (*dnsv1.ApplySpecResponse, error) {
	sum, err := s.apply(req.GetSpec())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &dnsv1.ApplySpecResponse{SpecSha256: sum}, nil
}

// Status implements dnsv1.DNSServer.
func (s *Status) Status(context.Context, *dnsv1.StatusRequest) (*dnsv1.StatusResponse, error) {
	s.mu.Lock()
	h, listen := s.h, s.listen
	s.mu.Unlock()
	resp := &dnsv1.StatusResponse{Serving: h != nil && h.Loaded()}
	if listen != "" {
		resp.ListenAddrs = []string{listen}
	}
	if raw, err := os.ReadFile(s.SpecPath); err == nil {
		sum := sha256.Sum256(raw)
		resp.SpecSha256 = hex.EncodeToString(sum[:])
	}
	return resp, nil
}

func (s *Status) serving(h *Handler, listen string) {
	s.mu.Lock()
	s.h, s.listen = h, listen
	s.mu.Unlock()
}

// serveLongLived is `ployz-dns serve`: the plugin socket answers at once
// (so ployzd can attach and Configure it), and DNS serves the kept spec as
// soon as there is one; a restart finds the spec kept by the last process
// and its port-53 sockets in systemd's fd store, and answers without
// waiting for ployzd.
func serveLongLived(version string, args []string, stderr io.Writer) int {
	var st *Status
	return sdk.ServeDataPlane(sdk.DataPlane{
		Name:     "dns",
		SpecPath: dnsspec.DefaultSpecPath,
		Sockets:  fdstore.Held,
		Plugin: func(spec string) *sdk.Plugin {
			st = &Status{SpecPath: spec}
			return Plugin(version, st)
		},
		Serve: func(ctx context.Context, spec string, served <-chan error, log hclog.Logger) int {
			if !sdk.WaitForFile(ctx, spec, served, log) {
				return 0
			}
			bin, _ := os.Executable()
			if len(os.Args) > 0 && filepath.IsAbs(os.Args[0]) {
				bin = os.Args[0] // the path the unit runs, which an upgrade re-points
			}
			err := Serve(ctx, Options{SpecPath: spec, Binary: bin, Log: log, OnServing: func(h *Handler) {
				cfg, _, _ := dnsspec.LoadSpec(spec)
				st.serving(h, cfg.Listen)
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
		},
	}, args, stderr)
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
	qtype := fs.String("type", "A", "query type: A, AAAA, PTR (NAME is then an IP address), TXT or SRV")
	if err := fs.Parse(args); err != nil || *server == "" || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: ployz-dns lookup --server ADDR [--type A|AAAA|PTR|TXT|SRV] NAME")
		return 2
	}
	m, err := lookupQuestion(*qtype, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "lookup:", err)
		return 2
	}
	r, _, err := (&miekg.Client{Timeout: 2 * time.Second}).Exchange(m, *server)
	if err != nil {
		fmt.Fprintln(stderr, "lookup:", err)
		return 1
	}
	fmt.Fprintln(stdout, miekg.RcodeToString[r.Rcode])
	for _, rr := range r.Answer {
		if v := answerValue(rr); v != "" {
			fmt.Fprintln(stdout, v)
		}
	}
	return 0
}

// lookupQuestion builds the query; for PTR the name is an IP address,
// turned into its reverse name.
func lookupQuestion(qtype, name string) (*miekg.Msg, error) {
	t, ok := miekg.StringToType[strings.ToUpper(qtype)]
	if !ok {
		return nil, fmt.Errorf("--type %q is not a DNS query type", qtype)
	}
	if t == miekg.TypePTR {
		rev, err := miekg.ReverseAddr(name)
		if err != nil {
			return nil, fmt.Errorf("--type PTR wants an IP address, got %q", name)
		}
		name = rev
	}
	m := new(miekg.Msg)
	m.SetQuestion(miekg.Fqdn(name), t)
	return m, nil
}

// answerValue is an answer record's data as one line.
func answerValue(rr miekg.RR) string {
	switch v := rr.(type) {
	case *miekg.A:
		return v.A.String()
	case *miekg.AAAA:
		return v.AAAA.String()
	case *miekg.PTR:
		return v.Ptr
	case *miekg.TXT:
		return strings.Join(v.Txt, " ")
	case *miekg.SRV:
		return fmt.Sprintf("%d %d %d %s", v.Priority, v.Weight, v.Port, v.Target)
	}
	return ""
}
