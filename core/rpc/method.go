package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// None is the request or response of a command that carries none. A
// None request goes on the wire without a payload and a None answer as
// JSON null, as the untyped commands sent them; a command that answered
// {} declares struct{} instead.
type None struct{}

// Method is one command declared with its types: its wire name, its
// capability, what it takes and what it answers. The server binds a
// handler to it (Bind) and a client calls it (Invoke), so both sides
// agree on the types at compile time while the JSON stays what the
// command's payload types say.
type Method[Req, Resp any] struct {
	Name       string // wire name, e.g. "create_container"
	Capability string // e.g. "ployz.container.create.v1"
}

// Declared is one catalogued Method, for listing and tests.
type Declared struct {
	Name       string
	Capability string
	Request    reflect.Type
	Response   reflect.Type // a stream's event type when Stream
	// Stream: the command is opened with OpenStream (StreamMethod).
	Stream bool
	// decode is the typed decoder Bind uses, for the fuzz tests.
	decode func(json.RawMessage) (any, error)
}

var catalog = struct {
	sync.Mutex
	byName map[string]Declared
}{byName: map[string]Declared{}}

// Declare catalogues a command with its request and response types. A
// name is declared once: a second declaration is a programming error.
func Declare[Req, Resp any](name, capability string) Method[Req, Resp] {
	m := Method[Req, Resp]{Name: name, Capability: capability}
	catalogue(Declared{Name: name, Capability: capability,
		Request: reflect.TypeFor[Req](), Response: reflect.TypeFor[Resp](),
		decode: func(raw json.RawMessage) (any, error) { return m.DecodeRequest(raw) }})
	return m
}

// catalogue adds d, refusing a name declared before.
func catalogue(d Declared) {
	catalog.Lock()
	defer catalog.Unlock()
	if _, dup := catalog.byName[d.Name]; dup {
		panic(fmt.Sprintf("rpc: command %q declared twice", d.Name))
	}
	catalog.byName[d.Name] = d
}

// Catalog lists every declared command, by name.
func Catalog() []Declared {
	catalog.Lock()
	defer catalog.Unlock()
	out := make([]Declared, 0, len(catalog.byName))
	for _, d := range catalog.byName {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds a declared command by wire name.
func Lookup(name string) (Declared, bool) {
	catalog.Lock()
	defer catalog.Unlock()
	d, ok := catalog.byName[name]
	return d, ok
}

// DecodeRequest decodes a declared command's payload as Decode does:
// unknown fields are ignored, a malformed one is refused naming it.
func (m Method[Req, Resp]) DecodeRequest(raw json.RawMessage) (Req, error) {
	var req Req
	err := Decode(m.Name, raw, &req)
	return req, err
}

// Bind makes the Route serving m with h: the payload decoded as Req, the
// answer encoded from Resp. Set Available on the result when the route
// can be down.
func Bind[Req, Resp any](m Method[Req, Resp], h func(context.Context, Req) (Resp, error)) Route {
	return Route{Command: m.Name, Capability: m.Capability, Handler: m.Handler(h)}
}

// Handler returns the untyped Handler serving m with h, for a route
// table that sets its own capability (a test double).
func (m Method[Req, Resp]) Handler(h func(context.Context, Req) (Resp, error)) Handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		req, err := m.DecodeRequest(raw)
		if err != nil {
			return nil, err
		}
		resp, err := h(ctx, req)
		if err != nil {
			return nil, err
		}
		if _, none := any(resp).(None); none {
			return nil, nil
		}
		return resp, nil
	}
}

// Caller is one call to one Machine, as *Client makes it.
type Caller interface {
	Call(ctx context.Context, t Target, command string, payload, out any) error
}

// Invoke calls m on t and decodes its answer as Resp.
func Invoke[Req, Resp any](ctx context.Context, c Caller, t Target, m Method[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := InvokeInto(ctx, c, t, m, req, &resp)
	return resp, err
}

// InvokeInto is Invoke decoding into out, which may hold defaults the
// answer leaves alone; out nil drops the answer.
func InvokeInto[Req, Resp any](ctx context.Context, c Caller, t Target, m Method[Req, Resp], req Req, out *Resp) error {
	var into any = out
	if out == nil {
		into = nil
	}
	return c.Call(ctx, t, m.Name, wirePayload(req), into)
}

// Fanouter asks several Machines at once, as *Client does.
type Fanouter interface {
	Fanout(ctx context.Context, t Target, command string, payload any) (FanoutResult, error)
}

// InvokeAll calls m on the Machines t names (every Machine when t names
// none) and decodes each answer as Resp.
func InvokeAll[Req, Resp any](ctx context.Context, c Fanouter, t Target, m Method[Req, Resp], req Req) ([]Answer[Resp], error) {
	fr, err := FanoutMethod(ctx, c, t, m, req)
	if err != nil {
		return nil, err
	}
	return Answers[Resp](fr, m.Name), nil
}

// wirePayload is what goes on the wire for req: nothing for None.
func wirePayload(req any) any {
	if _, none := req.(None); none {
		return nil
	}
	return req
}

// FanoutMethod is InvokeAll for a caller that reads each Machine's
// result itself (its order, its own wording of a failure); it decodes a
// payload with m.Answer.
func FanoutMethod[Req, Resp any](ctx context.Context, c Fanouter, t Target, m Method[Req, Resp], req Req) (FanoutResult, error) {
	return c.Fanout(ctx, t, m.Name, wirePayload(req))
}

// Answer decodes one Machine's answer to m.
func (m Method[Req, Resp]) Answer(payload json.RawMessage) (Resp, error) {
	var resp Resp
	err := json.Unmarshal(payload, &resp)
	return resp, err
}
