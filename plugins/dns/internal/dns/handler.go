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
	if !h.servesSource(w.RemoteAddr()) && req != nil && len(req.Question) == 1 && ParseName(req.Question[0].Name).Kind == NameExternal {
		resp := new(miekg.Msg)
		resp.SetRcode(req, miekg.RcodeRefused)
		_ = w.WriteMsg(resp)
		return
	}
	resp := h.Answer(req, isTCP(w))
	if resp == nil {
		return // nothing loaded yet: the client retries
	}
	_ = w.WriteMsg(resp)
}

// Answer computes the response to req, or nil when it must go unanswered
// (before the first load, or a message that is not one query).
func (h *Handler) Answer(req *miekg.Msg, tcp bool) *miekg.Msg {
	t := h.table.Load()
	if t == nil || req == nil || req.Response || len(req.Question) != 1 {
		return nil
	}
	v := h.view.Load()
	q := req.Question[0]
	n := ParseName(q.Name)
	if n.Kind == NameExternal {
		return h.forward(req, v, tcp)
	}
	resp := new(miekg.Msg)
	resp.SetReply(req)
	resp.Authoritative = true
	resp.RecursionAvailable = true
	if req.Opcode != miekg.OpcodeQuery || q.Qclass != miekg.ClassINET && q.Qclass != miekg.ClassANY {
		resp.Rcode = miekg.RcodeNotImplemented
		return resp
	}
	ips, found := t.Lookup(n, v.machine, v.subnet, h.rot.Add(1))
	if !found {
		resp.Rcode = miekg.RcodeNameError
		return resp
	}
	if q.Qtype != miekg.TypeA && q.Qtype != miekg.TypeANY {
		return resp // the name exists, it has no record of this type
	}
	for _, ip := range ips {
		resp.Answer = append(resp.Answer, &miekg.A{
			Hdr: miekg.RR_Header{Name: q.Name, Rrtype: miekg.TypeA, Class: miekg.ClassINET, Ttl: 0},
			A:   net.IP(ip.AsSlice()),
		})
	}
	if !tcp {
		resp.Truncate(udpSize(req))
	}
	return resp
}

// servesSource reports whether a query from a may have a non-internal
// name forwarded: it comes from this Machine's bridge subnet, the mesh
// (Cluster network) or loopback.
func (h *Handler) servesSource(a net.Addr) bool {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.UDPAddr:
		ip = a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		ip = a.AddrPort().Addr().Unmap()
	default:
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
