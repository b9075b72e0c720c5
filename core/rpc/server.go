package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/metadata"

	"github.com/ployz/ployz/core/rpc/machinepb"
	"github.com/ployz/ployz/internal/version"
)

// Metadata keys that route a call. Without either, the entry Machine
// answers itself.
const (
	// MetaTarget names one Machine (ID, unique ID prefix or name).
	MetaTarget = "ployz-target"
	// MetaTargets names several Machines, comma-separated, or "*" for all
	// the entry observes; the answer is a FanoutResult.
	MetaTargets = "ployz-targets"
)

// Handler runs one command locally and returns its payload.
type Handler func(ctx context.Context, payload json.RawMessage) (any, error)

// Route is one catalogued command.
type Route struct {
	Command    string // wire name, e.g. "inspect"
	Capability string // e.g. "ployz.machine.inspect.v1"
	Handler    Handler
	// Available reports whether the route can serve now, e.g. whether the
	// plugin behind it is healthy; nil means always.
	Available func() bool
}

// Peer is a Machine the entry can forward to, from its own observation.
type Peer struct {
	ID      string
	Name    string
	Address string // host:port of its Machine RPC over the mesh
	// RPCKey is the Machine's published rpc_key: a mesh call to it must
	// be answered by this key, and a mesh call from it is admitted.
	RPCKey string
	// Phase is the Machine's phase as its row reports it.
	Phase string
}

// Peers lists the Machines this entry observes, itself included.
type Peers func(ctx context.Context) ([]Peer, error)

// Server is the Machine RPC service of one Machine.
type Server struct {
	machinepb.UnimplementedMachineServer

	log     hclog.Logger
	mu      sync.RWMutex
	routes  map[string]Route
	streams map[string]StreamRoute
	// extra returns capabilities served outside the route table (plugins).
	extra func() []string
	local func() (id, name string)
	peers Peers
	dial  func(ctx context.Context, p Peer) (*Client, error)
	// pool keeps a connection per peer for forwarded calls (peerpool.go).
	pool *peerPool
}

// Options configures a Server.
type Options struct {
	Logger hclog.Logger
	// Local returns this Machine's ID and name.
	Local func() (id, name string)
	// Peers lists forwarding targets; nil disables forwarding.
	Peers Peers
	// ExtraCapabilities lists capabilities served by plugins.
	ExtraCapabilities func() []string
	// Dial opens a client to a peer; the daemon passes its dialPeer
	// (MeshDialer). Forwarded calls keep the Client it returns, one per
	// peer, until idle or the peer's row changes (peerpool.go); a
	// forwarded stream dials its own. The default, plain TCP to
	// p.Address, is for tests only.
	Dial func(ctx context.Context, p Peer) (*Client, error)
}

// NewServer returns a Server with the always-present describe_contract route.
func NewServer(o Options) *Server {
	s := &Server{log: o.Logger, routes: map[string]Route{}, extra: o.ExtraCapabilities, local: o.Local, peers: o.Peers, dial: o.Dial}
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	if s.local == nil {
		s.local = func() (string, string) { return "", "" }
	}
	if s.dial == nil {
		s.dial = func(ctx context.Context, p Peer) (*Client, error) { return DialTCP(ctx, p.Address) }
	}
	s.pool = newPeerPool(s.dial, peerIdle)
	s.Handle(Bind(DescribeContract, s.describeContract))
	return s
}

// Handle adds or replaces a route.
func (s *Server) Handle(r Route) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[r.Command] = r
}

// Contract is describe_contract's payload.
type Contract struct {
	MachineID     string   `json:"machine_id"`
	MachineName   string   `json:"machine_name,omitempty"`
	ProtocolMajor int      `json:"protocol_major"`
	DaemonVersion string   `json:"daemon_version"` // diagnostic only: clients decide by capability
	Capabilities  []string `json:"capabilities"`
}

// Capabilities lists what this Machine serves right now.
func (s *Server) Capabilities() []string {
	s.mu.RLock()
	caps := []string{CapStreamRawData}
	for _, r := range s.routes {
		if r.Available == nil || r.Available() {
			caps = append(caps, r.Capability)
		}
	}
	s.mu.RUnlock()
	if s.extra != nil {
		caps = append(caps, s.extra()...)
	}
	sort.Strings(caps)
	return slices.Compact(caps)
}

func (s *Server) describeContract(context.Context, None) (Contract, error) {
	id, name := s.local()
	return Contract{MachineID: id, MachineName: name, ProtocolMajor: version.ProtocolMajor,
		DaemonVersion: version.Version, Capabilities: s.Capabilities()}, nil
}

// Call implements machinepb.MachineServer.
func (s *Server) Call(ctx context.Context, f *machinepb.Frame) (*machinepb.Frame, error) {
	var req Request
	if err := json.Unmarshal(f.GetJson(), &req); err != nil {
		return frame(Response{ProtocolMajor: version.ProtocolMajor, Error: Errorf(CodeInvalidArgument, "request envelope: %v", err)}), nil
	}
	if req.ProtocolMajor != version.ProtocolMajor {
		return frame(Response{ProtocolMajor: version.ProtocolMajor, Error: Errorf(CodeUnsupported,
			"protocol_major %d is not served here (this Machine speaks %d)", req.ProtocolMajor, version.ProtocolMajor).
			With("requested", req.ProtocolMajor).With("supported", version.ProtocolMajor).With("field", "protocol_major")}), nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if t := first(md.Get(MetaTargets)); t != "" {
		res := s.fanout(ctx, f, req.Command, t)
		return frame(okResponse(res)), nil
	}
	if t := first(md.Get(MetaTarget)); t != "" {
		id, name := s.local()
		if t != id && t != name && !(len(t) >= 4 && strings.HasPrefix(id, t)) {
			return s.forwardOne(ctx, f, req.Command, t), nil
		}
		// Our own name may be ambiguous: resolve through the peer list.
		if t == name && t != id {
			if peers, err := s.listPeers(ctx); err == nil {
				if _, err := Resolve(peers, t); err != nil {
					return frame(errResponse(err)), nil
				}
			}
		}
	}
	return frame(s.dispatch(ctx, req)), nil
}

// dispatch runs req on this Machine.
func (s *Server) dispatch(ctx context.Context, req Request) Response {
	s.mu.RLock()
	r, ok := s.routes[req.Command]
	s.mu.RUnlock()
	if !ok {
		return errResponse(unknownCommand(req.Command, false))
	}
	if r.Available != nil && !r.Available() {
		return errResponse(Errorf(CodeUnavailable, "%s is not advertised by this Machine right now", r.Capability).With("capability", r.Capability))
	}
	out, err := r.Handler(ctx, req.Payload)
	if err != nil {
		e := asError(err)
		// A handler may name the plugin capability it lacks; keep that.
		if _, named := e.Details["capability"]; !named && (e.Code == CodeUnsupported || e.Code == CodeUnavailable) {
			e = e.With("capability", r.Capability)
		}
		return errResponse(e)
	}
	return okResponse(out)
}

func okResponse(v any) Response {
	b, err := json.Marshal(v)
	if err != nil {
		return errResponse(Errorf(CodeInternal, "encode response: %v", err))
	}
	return Response{ProtocolMajor: version.ProtocolMajor, Payload: b}
}

func errResponse(err error) Response {
	return Response{ProtocolMajor: version.ProtocolMajor, Error: asError(err)}
}

func asError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

func frame(r Response) *machinepb.Frame {
	b, _ := json.Marshal(r)
	return &machinepb.Frame{Json: b}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (s *Server) listPeers(ctx context.Context) ([]Peer, error) {
	if s.peers == nil {
		return nil, Errorf(CodeUnavailable, "this Machine cannot forward: it is not participating in a Cluster")
	}
	return s.peers(ctx)
}

// forwardOne relays f to the one Machine target names.
func (s *Server) forwardOne(ctx context.Context, f *machinepb.Frame, cmd, target string) *machinepb.Frame {
	peers, err := s.listPeers(ctx)
	if err != nil {
		return frame(errResponse(err))
	}
	p, err := Resolve(peers, target)
	if err != nil {
		return frame(errResponse(err))
	}
	out, err := s.relay(ctx, p, cmd, f)
	if err != nil {
		return frame(errResponse(err))
	}
	return out
}

// relay runs f (command cmd) on p: here when p is this Machine, else on
// p's kept connection (peerPool.call).
func (s *Server) relay(ctx context.Context, p Peer, cmd string, f *machinepb.Frame) (*machinepb.Frame, error) {
	id, _ := s.local()
	if p.ID == id {
		var req Request
		json.Unmarshal(f.GetJson(), &req) // validated by Call
		return frame(s.dispatch(ctx, req)), nil
	}
	out, err := s.pool.call(ctx, p, cmd, f)
	if err != nil {
		return nil, Errorf(CodeUnavailable, "machine %s (%s) at %s: %v", p.Name, short(p.ID), p.Address, err).With("machine_id", p.ID)
	}
	return s.nameLackingFrame(out, false, p), nil
}

// fanout relays f to every target and gathers per-target results.
func (s *Server) fanout(ctx context.Context, f *machinepb.Frame, cmd, spec string) FanoutResult {
	var res FanoutResult
	peers, err := s.listPeers(ctx)
	if err != nil {
		id, name := s.local()
		res.Omitted = append(res.Omitted, Omission{MachineID: id, MachineName: name, Reason: err.Error()})
		return res
	}
	var targets []Peer
	if spec == "*" {
		targets = peers
	} else {
		for _, t := range strings.Split(spec, ",") {
			p, err := Resolve(peers, strings.TrimSpace(t))
			if err != nil {
				res.Omitted = append(res.Omitted, Omission{MachineName: t, Reason: err.Error()})
				continue
			}
			targets = append(targets, p)
		}
	}
	results := make([]TargetResult, len(targets))
	var wg sync.WaitGroup
	for i, p := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := TargetResult{MachineID: p.ID, MachineName: p.Name}
			out, err := s.relay(ctx, p, cmd, f)
			if err != nil {
				r.Error = asError(err)
			} else {
				var resp Response
				if err := json.Unmarshal(out.GetJson(), &resp); err != nil {
					r.Error = Errorf(CodeInternal, "machine %s answered malformed JSON: %v", p.Name, err)
				} else {
					r.Payload, r.Error = resp.Payload, resp.Error
				}
			}
			results[i] = r
		}()
	}
	wg.Wait()
	res.Results = results
	return res
}

// Resolve finds the one Peer that target names: an exact ID, a unique ID
// prefix of at least 4 characters, or a unique name. Names may be shared
// (Name Ambiguity is preserved, bet 5), so an ambiguous name is an error
// listing the IDs to choose from; an unknown one lists valid names.
func Resolve(peers []Peer, target string) (Peer, error) {
	for _, p := range peers {
		if p.ID == target {
			return p, nil
		}
	}
	var byName, byPrefix []Peer
	for _, p := range peers {
		if p.Name == target {
			byName = append(byName, p)
		}
		if len(target) >= 4 && strings.HasPrefix(p.ID, target) {
			byPrefix = append(byPrefix, p)
		}
	}
	for _, m := range [][]Peer{byName, byPrefix} {
		switch len(m) {
		case 0:
			continue
		case 1:
			return m[0], nil
		default:
			ids := make([]string, len(m))
			for i, p := range m {
				ids[i] = p.ID
			}
			return Peer{}, Errorf(CodeAmbiguous, "machine %q is ambiguous: it names %d Machines (%s); use an ID",
				target, len(m), strings.Join(ids, ", ")).With("candidates", ids)
		}
	}
	names := make([]string, 0, len(peers))
	for _, p := range peers {
		names = append(names, fmt.Sprintf("%s (%s)", p.Name, short(p.ID)))
	}
	sort.Strings(names)
	return Peer{}, Errorf(CodeNotFound, "machine %q is not in this Machine's observation; known: %s", target, strings.Join(names, ", ")).
		With("target", target)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
