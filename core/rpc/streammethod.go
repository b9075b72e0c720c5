package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// StreamMethod is one streaming command declared with its types: what
// opens it (Req) and the events its server sends (Event). Data frames
// and the frames a client sends stay StreamFrames, as each command's
// doc describes them (exec's and run_container's data carry an
// ExecOutput marker; run_container's client sends RunControl events).
type StreamMethod[Req, Event any] struct {
	Name       string // wire name, e.g. "exec"
	Capability string
}

// DeclareStream catalogues a streaming command with its request and
// event types; like Declare, a name is declared once.
func DeclareStream[Req, Event any](name, capability string) StreamMethod[Req, Event] {
	m := StreamMethod[Req, Event]{Name: name, Capability: capability}
	catalogue(Declared{Name: name, Capability: capability, Stream: true,
		Request: reflect.TypeFor[Req](), Response: reflect.TypeFor[Event](),
		decode: func(raw json.RawMessage) (any, error) { return m.DecodeRequest(raw) }})
	return m
}

// DecodeRequest decodes the stream's opening payload as Decode does.
func (m StreamMethod[Req, Event]) DecodeRequest(raw json.RawMessage) (Req, error) {
	var req Req
	err := Decode(m.Name, raw, &req)
	return req, err
}

// BindStream makes the StreamRoute serving m with h, which gets the
// opening payload decoded as Req.
func BindStream[Req, Event any](m StreamMethod[Req, Event], h func(context.Context, Req, StreamConn) error) StreamRoute {
	return StreamRoute{Command: m.Name, Capability: m.Capability, Handler: m.Handler(h)}
}

// Handler returns the untyped StreamHandler serving m with h, for a
// route that wraps it (a Docker check) or sets its own capability.
func (m StreamMethod[Req, Event]) Handler(h func(context.Context, Req, StreamConn) error) StreamHandler {
	return func(ctx context.Context, raw json.RawMessage, s StreamConn) error {
		req, err := m.DecodeRequest(raw)
		if err != nil {
			return err
		}
		return h(ctx, req, s)
	}
}

// Send sends ev as one event frame on s.
func (m StreamMethod[Req, Event]) Send(s StreamConn, ev Event) error {
	return s.Send(StreamFrame{Event: m.Encode(ev)})
}

// Encode is ev as a frame's event, for a frame that carries data too.
// The event types are plain structs, so encoding them cannot fail.
func (m StreamMethod[Req, Event]) Encode(ev Event) json.RawMessage {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("rpc: %s event %T: %v", m.Name, ev, err))
	}
	return b
}

// Event decodes f's event as m's; a frame without one decodes as the
// zero Event.
func (m StreamMethod[Req, Event]) Event(f StreamFrame) (Event, error) {
	var ev Event
	if len(f.Event) == 0 {
		return ev, nil
	}
	if err := json.Unmarshal(f.Event, &ev); err != nil {
		return ev, fmt.Errorf("%s: malformed event: %w", m.Name, err)
	}
	return ev, nil
}

// Opener opens streams, as *Client does.
type Opener interface {
	OpenStream(ctx context.Context, t Target, command string, payload any) (*ClientStream, error)
}

// Open starts m on t with req (a None request goes without a payload).
func Open[Req, Event any](ctx context.Context, c Opener, t Target, m StreamMethod[Req, Event], req Req) (*ClientStream, error) {
	return c.OpenStream(ctx, t, m.Name, wirePayload(req))
}

// Answer closes st's sending side and reads it to its end, answering
// its last event as m's (CloseAndAnswer).
func (m StreamMethod[Req, Event]) Answer(st *ClientStream) (Event, error) {
	var ev Event
	err := st.CloseAndAnswer(&ev)
	return ev, err
}
