package dns

import (
	"time"

	miekg "github.com/miekg/dns"
)

// forward relays req to the upstreams in order: UDP first, TCP when the
// answer is truncated (or the client asked over TCP). No upstream that
// answers gives SERVFAIL.
func (h *Handler) forward(req *miekg.Msg, v *view, tcp bool) *miekg.Msg {
	timeout := h.ForwardTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	for _, up := range v.upstreams {
		if up == v.listen {
			continue // never forward to ourselves
		}
		addr := up.String()
		var resp *miekg.Msg
		var err error
		if !tcp {
			resp, _, err = (&miekg.Client{Net: "udp", Timeout: timeout, UDPSize: 4096}).Exchange(req, addr)
		}
		if tcp || (err == nil && resp.Truncated) {
			resp, _, err = (&miekg.Client{Net: "tcp", Timeout: timeout}).Exchange(req, addr)
		}
		if err != nil {
			h.log.Debug("forward", "upstream", addr, "name", req.Question[0].Name, "error", err)
			continue
		}
		resp.Id = req.Id
		if !tcp {
			resp.Truncate(udpSize(req))
		}
		return resp
	}
	fail := new(miekg.Msg)
	fail.SetRcode(req, miekg.RcodeServerFailure)
	fail.RecursionAvailable = true
	return fail
}
