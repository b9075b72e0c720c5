package dns

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"
)

// Handler answers DNS queries from the current Table and forwards
// non-internal names. Before its first Table it answers nothing.
type Handler struct {
	table atomic.Pointer[Table]
	view  atomic.Pointer[view]
	rot   atomic.Uint64
	log   hclog.Logger
	// ForwardTimeout bounds one upstream exchange (default 3 s).
	ForwardTimeout time.Duration
}

// view is the part of the spec queries depend on.
type view struct {
	machine   string
	subnet    netip.Prefix
	network   netip.Prefix // with subnet: who may have names forwarded
	listen    netip.AddrPort
	upstreams []netip.AddrPort
}

// NewHandler returns a Handler serving cfg; it answers nothing until
// SetTable is called.
func NewHandler(cfg dnsspec.Config, log hclog.Logger) *Handler {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	h := &Handler{log: log, ForwardTimeout: 3 * time.Second}
	h.SetConfig(cfg)
	return h
}

// SetConfig swaps the spec the handler answers from.
func (h *Handler) SetConfig(cfg dnsspec.Config) {
	h.view.Store(&view{machine: cfg.Machine, subnet: cfg.SubnetPrefix, network: cfg.NetworkPrefix, listen: cfg.ListenAddr, upstreams: cfg.UpstreamAddrs})
}

// SetTable makes t the answer set; the first call starts answering.
func (h *Handler) SetTable(t *Table) { h.table.Store(t) }

// Loaded reports whether a Table has been loaded.
func (h *Handler) Loaded() bool { return h.table.Load() != nil }

// ServeDNS implements miekg/dns.Handler.
func (h *Handler) ServeDNS(w miekg.ResponseWriter, req *miekg.Msg) {
	src := addrOf(w.RemoteAddr())
	if !h.servesSource(src) && req != nil && len(req.Question) == 1 && ParseName(req.Question[0].Name).Kind == NameExternal {
		resp := new(miekg.Msg)
		resp.SetRcode(req, miekg.RcodeRefused)
		withOPT(resp, req)
		_ = w.WriteMsg(resp)
		return
	}
	resp := h.AnswerFrom(req, src, isTCP(w))
	if resp == nil {
		return // nothing loaded yet: the client retries
	}
	_ = w.WriteMsg(resp)
}

// Answer computes the response to req, or nil when it must go unanswered
// (before the first load, or a message that is not one query). The
// caller is unknown: <service>.internal is NXDOMAIN.
func (h *Handler) Answer(req *miekg.Msg, tcp bool) *miekg.Msg {
	return h.AnswerFrom(req, netip.Addr{}, tcp)
}

// AnswerFrom is Answer for a query from src, whose Container's namespace
// resolves <service>.internal.
func (h *Handler) AnswerFrom(req *miekg.Msg, src netip.Addr, tcp bool) *miekg.Msg {
	t := h.table.Load()
	if t == nil || req == nil || req.Response || len(req.Question) != 1 {
		return nil
	}
	v := h.view.Load()
	q := req.Question[0]
	n := ParseName(q.Name)
	if n.Kind == NameExternal {
		return withOPT(h.forward(req, v, tcp), req)
	}
	resp := new(miekg.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = true
	if o := req.IsEdns0(); o != nil && o.Version() != 0 {
		resp.Rcode = miekg.RcodeBadVers // RFC 6891 6.1.3: only version 0 exists
		return withOPT(resp, req)
	}
	if req.Opcode != miekg.OpcodeQuery || q.Qclass != miekg.ClassINET && q.Qclass != miekg.ClassANY {
		resp.Rcode = miekg.RcodeNotImplemented
		return withOPT(resp, req)
	}
	if n.Kind == NameReverse {
		return withOPT(h.answerPTR(resp, t, v, n, q, src), req)
	}
	ips, found := resolve(nil, t, v, n, src, h.rot.Add(1))
	if !found {
		resp.Rcode = miekg.RcodeNameError
		return withOPT(resp, req)
	}
	if q.Qtype != miekg.TypeA && q.Qtype != miekg.TypeANY {
		return withOPT(resp, req) // the name exists, it has no record of this type
	}
	for _, ip := range ips {
		resp.Answer = append(resp.Answer, &miekg.A{
			Hdr: miekg.RR_Header{Name: q.Name, Rrtype: miekg.TypeA, Class: miekg.ClassINET, Ttl: 0},
			A:   net.IP(ip.AsSlice()),
		})
	}
	withOPT(resp, req)
	if !tcp {
		resp.Truncate(udpSize(req))
	}
	return resp
}

// shortName resolves <service>.internal in the namespace of the Container
// holding src; a caller that is no Container gets NXDOMAIN.
func shortName(t *Table, n Name, src netip.Addr) Name {
	_, ns, ok := t.Host(src)
	if !ok {
		return Name{Kind: NameUnknown}
	}
	return Name{Kind: NameService, Service: n.Service, Namespace: ns, Key: n.Service + "." + ns}
}

// resolve appends to dst the addresses answering the internal name n
// (no reverse name) for a query from src; both the general path and the
// UDP hot path answer through it. <alias>.<namespace>.internal (what a
// Container's search domain makes of <alias>) and <alias>.internal
// answer a network alias when no Service of that name is in the
// caller's namespace. The namespace must be the caller's own: an alias
// belongs to its network, not to a namespace's names, so another
// namespace's domain never answers it.
func resolve(dst []netip.Addr, t *Table, v *view, n Name, src netip.Addr, rot uint64) (ips []netip.Addr, found bool) {
	if n.Kind == NameShort {
		n = shortName(t, n, src)
	}
	ips, found = t.AppendLookup(dst, n, v.machine, v.subnet, rot)
	if found || n.Kind != NameService {
		return ips, found
	}
	if _, ns, ok := t.Host(src); !ok || ns != n.Namespace {
		return ips, false
	}
	return t.AppendAlias(ips, n.Service, src, rot)
}

// answerPTR answers a reverse name: a Container address gets its
// Service's name; another address inside this Machine's subnet or the
// Cluster network is NXDOMAIN (never leaked upstream); the rest is
// forwarded (refused, like any outside name, to callers not served).
func (h *Handler) answerPTR(resp *miekg.Msg, t *Table, v *view, n Name, q miekg.Question, src netip.Addr) *miekg.Msg {
	ptr, _, ok := t.Host(n.Addr)
	if !ok {
		switch {
		case v.subnet.Contains(n.Addr) || (v.network.IsValid() && v.network.Contains(n.Addr)):
			resp.Rcode = miekg.RcodeNameError
			return resp
		case src.IsValid() && !h.servesSource(src):
			resp.Authoritative, resp.Rcode = false, miekg.RcodeRefused
			return resp
		}
		req := new(miekg.Msg)
		req.SetQuestion(q.Name, q.Qtype)
		req.Id, req.RecursionDesired = resp.Id, resp.RecursionDesired
		return h.forward(req, v, false)
	}
	if q.Qtype == miekg.TypePTR || q.Qtype == miekg.TypeANY {
		resp.Answer = append(resp.Answer, &miekg.PTR{
			Hdr: miekg.RR_Header{Name: q.Name, Rrtype: miekg.TypePTR, Class: miekg.ClassINET, Ttl: 0}, Ptr: ptr})
	}
	return resp
}

// ednsSize is the UDP payload size advertised in responses' OPT record:
// the size that avoids IP fragmentation on common paths (DNS Flag Day 2020).
const ednsSize = 1232

// withOPT gives resp an OPT record when req carried one (RFC 6891: a
// responder that understands EDNS0 answers with OPT), mirroring the DO
// bit; resp without req's OPT passes unchanged.
func withOPT(resp, req *miekg.Msg) *miekg.Msg {
	o := req.IsEdns0()
	if resp == nil || o == nil || resp.IsEdns0() != nil {
		return resp
	}
	resp.SetEdns0(ednsSize, o.Do())
	return resp
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// servesSource reports whether a query from a may have a non-internal
// name forwarded: it comes from this Machine's bridge subnet, the mesh
// (Cluster network) or loopback.
func (h *Handler) servesSource(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	v := h.view.Load()
	return ip.IsLoopback() || v.subnet.Contains(ip) || (v.network.IsValid() && v.network.Contains(ip))
}

func isTCP(w miekg.ResponseWriter) bool {
	_, ok := w.RemoteAddr().(*net.TCPAddr)
	return ok
}

func udpSize(req *miekg.Msg) int {
	if o := req.IsEdns0(); o != nil && o.UDPSize() > miekg.MinMsgSize {
		return int(o.UDPSize())
	}
	return miekg.MinMsgSize
}
