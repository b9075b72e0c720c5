package rpc

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestOlderMachineRefusalNamesCapability: m1 (the Entry, release N) serves
// "newer" and "newer_stream"; m2 (release N-1) knows neither. A call to m2
// through m1 is refused with the capability m2 lacks named
// (details.capability) and m2's id, unary and streaming; a command m1
// does not know either keeps only details.command.
func TestOlderMachineRefusalNamesCapability(t *testing.T) {
	ms := cluster(t, "m1", "m2")
	ms[0].srv.Handle(Route{Command: "newer", Capability: "ployz.test.newer.v1",
		Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})
	ms[0].srv.HandleStream(StreamRoute{Command: "newer_stream", Capability: "ployz.test.newer_stream.v1",
		Handler: func(context.Context, json.RawMessage, StreamConn) error { return nil }})
	c := client(t, ms[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	err := c.Call(ctx, Target{One: "m2"}, "newer", nil, nil)
	if capName, ok := Capability(err); !ok || capName != "ployz.test.newer.v1" {
		t.Fatalf("unary call to the older Machine: %v; want details.capability", err)
	}
	if e := err.(*Error); e.Code != CodeUnsupported || e.Details["machine_id"] != ms[1].id || e.Details["command"] != "newer" {
		t.Fatalf("refusal details %+v", e)
	}
	if err := c.Call(ctx, Target{One: "m2"}, "whoami", nil, nil); err != nil {
		t.Fatalf("a command both serve: %v", err)
	}
	if _, ok := Capability(c.Call(ctx, Target{One: "m2"}, "nobody_serves", nil, nil)); ok {
		t.Fatal("a command the Entry does not serve either got a capability named")
	}

	st, err := c.OpenStream(ctx, Target{One: "m2"}, "newer_stream", nil)
	if err == nil {
		defer st.Close()
		_, err = st.Recv()
	}
	if capName, ok := Capability(err); !ok || capName != "ployz.test.newer_stream.v1" {
		t.Fatalf("stream to the older Machine: %v; want details.capability", err)
	}
}
