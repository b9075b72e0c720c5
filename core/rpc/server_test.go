package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type testMachine struct {
	id, name string
	addr     string
	srv      *Server
	lis      net.Listener
}

// cluster starts n Machine RPC servers on loopback TCP that forward to
// each other, with names given (duplicates allowed).
func cluster(t *testing.T, names ...string) []*testMachine {
	t.Helper()
	ms := make([]*testMachine, len(names))
	peers := func(context.Context) ([]Peer, error) {
		out := make([]Peer, len(ms))
		for i, m := range ms {
			out[i] = Peer{ID: m.id, Name: m.name, Address: m.addr}
		}
		return out, nil
	}
	for i, n := range names {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		m := &testMachine{id: strings.Repeat(string(rune('a'+i)), 32), name: n, addr: lis.Addr().String(), lis: lis}
		m.srv = NewServer(Options{Local: func() (string, string) { return m.id, m.name }, Peers: peers})
		m.srv.Handle(Route{Command: "whoami", Capability: "ployz.test.whoami.v1", Handler: func(context.Context, json.RawMessage) (any, error) {
			return map[string]string{"id": m.id}, nil
		}})
		g := m.srv.GRPCServer()
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		ms[i] = m
	}
	return ms
}

func client(t *testing.T, m *testMachine) *Client {
	t.Helper()
	c, err := DialTCP(context.Background(), m.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDescribeContractAndRefusals(t *testing.T) {
	ms := cluster(t, "m1")
	var up atomic.Bool
	ms[0].srv.Handle(Route{Command: "plugged", Capability: "ployz.dns.serve.v1", Available: up.Load,
		Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})
	c := client(t, ms[0])
	ctx := context.Background()

	var ct Contract
	if err := c.Call(ctx, Target{}, CmdDescribeContract, nil, &ct); err != nil {
		t.Fatal(err)
	}
	if ct.MachineID != ms[0].id || ct.ProtocolMajor != 1 || !contains(ct.Capabilities, CapDescribeContract) || contains(ct.Capabilities, "ployz.dns.serve.v1") {
		t.Fatalf("contract = %+v", ct)
	}

	err := c.Call(ctx, Target{}, "plugged", nil, nil)
	if capName, ok := Capability(err); !ok || capName != "ployz.dns.serve.v1" {
		t.Fatalf("refusal of an unavailable route = %v; want details.capability", err)
	}
	up.Store(true)
	if err := c.Call(ctx, Target{}, "plugged", nil, nil); err != nil {
		t.Fatalf("after the capability returned: %v", err)
	}

	resp, err := c.CallMajor(ctx, 2, CmdDescribeContract, nil)
	if err != nil || resp.Error == nil || resp.Error.Code != CodeUnsupported || resp.Error.Details["field"] != "protocol_major" {
		t.Fatalf("protocol_major 2 = %+v, %v", resp.Error, err)
	}

	var e *Error
	if err := c.Call(ctx, Target{}, "no_such_command", nil, nil); !errors.As(err, &e) || e.Details["command"] != "no_such_command" {
		t.Fatalf("unknown command = %v", err)
	}
}

func TestForwardingAndAmbiguity(t *testing.T) {
	ms := cluster(t, "m1", "m2", "m2")
	c := client(t, ms[0])
	ctx := context.Background()

	var who map[string]string
	if err := c.Call(ctx, Target{One: ms[1].id}, "whoami", nil, &who); err != nil || who["id"] != ms[1].id {
		t.Fatalf("forward by id = %v, %v", who, err)
	}
	if err := c.Call(ctx, Target{One: ms[2].id[:6]}, "whoami", nil, &who); err != nil || who["id"] != ms[2].id {
		t.Fatalf("forward by id prefix = %v, %v", who, err)
	}
	if err := c.Call(ctx, Target{One: "m1"}, "whoami", nil, &who); err != nil || who["id"] != ms[0].id {
		t.Fatalf("own name = %v, %v", who, err)
	}
	var e *Error
	err := c.Call(ctx, Target{One: "m2"}, "whoami", nil, nil)
	if !errors.As(err, &e) || e.Code != CodeAmbiguous || !strings.Contains(e.Message, ms[1].id) || !strings.Contains(e.Message, ms[2].id) {
		t.Fatalf("ambiguous name = %v", err)
	}
	err = c.Call(ctx, Target{One: "m9"}, "whoami", nil, nil)
	if !errors.As(err, &e) || e.Code != CodeNotFound || !strings.Contains(e.Message, "m1") {
		t.Fatalf("unknown name should list valid names: %v", err)
	}
}

func TestFanoutReportsEachTarget(t *testing.T) {
	ms := cluster(t, "m1", "m2", "m3")
	ms[2].lis.Close() // m3 stops answering
	c := client(t, ms[0])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := c.Fanout(ctx, Target{All: true}, "whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 3 || !res.Partial() {
		t.Fatalf("fan-out = %+v", res)
	}
	for _, r := range res.Results {
		switch r.MachineID {
		case ms[2].id:
			if r.Error == nil || r.Error.Code != CodeUnavailable {
				t.Errorf("m3 should fail as unavailable, got %+v", r)
			}
		default:
			if r.Error != nil || !strings.Contains(string(r.Payload), r.MachineID) {
				t.Errorf("%s: %+v", r.MachineName, r)
			}
		}
	}
	res, err = c.Fanout(ctx, Target{Set: []string{"m1", "nope"}}, "whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || len(res.Omitted) != 1 || res.Omitted[0].MachineName != "nope" {
		t.Fatalf("fan-out with an unknown target = %+v", res)
	}
}

func TestDecodeNamesField(t *testing.T) {
	var v struct {
		Name string `json:"name"`
	}
	err := Decode("update_machine", json.RawMessage(`{"name":7}`), &v)
	var e *Error
	if !errors.As(err, &e) || e.Details["field"] != "name" {
		t.Fatalf("decode error = %v", err)
	}
	if err := Decode("update_machine", json.RawMessage(`{"name":"x","unknown":1}`), &v); err != nil || v.Name != "x" {
		t.Fatalf("tolerant decode = %v", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
