package rpc

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// A Machine on an older release refuses a command it does not know by its
// name (details.command): it cannot know the capability the command needs.
// The Entry Machine relaying the call knows it when it serves the command
// itself, so a mixed Cluster's refusal still says which capability the
// target lacks (details.capability), as a client routing by capability
// expects.

// nameLacking adds details.capability and details.machine_id to an
// unknown-command refusal from peer p relayed in b (a unary Response when
// stream is false, else a StreamFrame); any other b is returned as it is.
func (s *Server) nameLacking(b []byte, stream bool, p Peer) []byte {
	if !bytes.Contains(b, []byte(`"`+CodeUnsupported+`"`)) {
		return b // the common case, decoded no further
	}
	var e **Error
	var resp Response
	var sf StreamFrame
	if stream {
		if json.Unmarshal(b, &sf) != nil {
			return b
		}
		e = &sf.Error
	} else {
		if json.Unmarshal(b, &resp) != nil {
			return b
		}
		e = &resp.Error
	}
	if *e == nil || (*e).Code != CodeUnsupported {
		return b
	}
	cmd, _ := (*e).Details["command"].(string)
	if _, named := (*e).Details["capability"]; named || cmd == "" {
		return b
	}
	s.mu.RLock()
	r, ok := s.routes[cmd]
	s.mu.RUnlock()
	if !ok {
		return b
	}
	n := (*e).With("capability", r.Capability).With("machine_id", p.ID)
	n.Message = fmt.Sprintf("%s: machine %s lacks capability %s (it runs an older release)", n.Message, p.Name, r.Capability)
	*e = n
	var out []byte
	var err error
	if stream {
		out, err = json.Marshal(sf)
	} else {
		out, err = json.Marshal(resp)
	}
	if err != nil {
		return b
	}
	return out
}

// nameLackingFrame is nameLacking on a relayed frame.
func (s *Server) nameLackingFrame(f *machinepb.Frame, stream bool, p Peer) *machinepb.Frame {
	if f == nil || len(f.GetJson()) == 0 {
		return f
	}
	if b := s.nameLacking(f.GetJson(), stream, p); !bytes.Equal(b, f.GetJson()) {
		return &machinepb.Frame{Json: b, Data: f.GetData()}
	}
	return f
}
