package rpc

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/prereq"
)

// BenchmarkRPCAuthOverhead times one Machine RPC round trip on the mesh
// listener with authentication (mutual TLS + the machines-table check)
// against main's plaintext listener, interleaved in the same run, and
// reports their ratio. "warm" reuses one connection (the operator's and a
// stream's case); "dial" opens one per call (how forwarding relays).
func BenchmarkRPCAuthOverhead(b *testing.B) {
	for _, mode := range []string{"warm", "dial"} {
		b.Run(mode, func(b *testing.B) {
			plain, auth := benchPair(b)
			ctx := context.Background()
			call := func(dial func() *Client, c *Client) time.Duration {
				t0 := time.Now()
				if c == nil {
					c = dial()
					defer c.Close()
				}
				if err := c.Call(ctx, Target{}, "nop", nil, nil); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			var warmP, warmA *Client
			if mode == "warm" {
				warmP, warmA = plain(), auth()
				defer warmP.Close()
				defer warmA.Close()
			}
			var tp, ta time.Duration
			b.ResetTimer()
			for range b.N {
				tp += call(plain, warmP)
				ta += call(auth, warmA)
			}
			b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "plain-ns/call")
			b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "auth-ns/call")
			b.ReportMetric(float64(ta)/float64(tp), "auth/plain")
		})
	}
}

// benchPair starts one Machine serving "nop" on a plaintext listener and
// on an authenticated one, and returns dialers for both; the
// authenticated caller is a participating Machine at 127.0.0.3.
func benchPair(b *testing.B) (plain, auth func() *Client) {
	srvID, callerID := testIdentity(b), testIdentity(b)
	pl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		prereq.Missing(b, "127.0.0.2 on the loopback (Linux routes 127/8 there)", err)
	}
	al, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		prereq.Missing(b, "127.0.0.2 on the loopback (Linux routes 127/8 there)", err)
	}
	self := Peer{ID: "server", Name: "m1", Address: al.Addr().String(), RPCKey: srvID.PublicKey(), Phase: PhaseParticipating}
	caller := Peer{ID: "caller", Name: "m2", Address: "127.0.0.3:7569", RPCKey: callerID.PublicKey(), Phase: PhaseParticipating}
	srv := NewServer(Options{Peers: func(context.Context) ([]Peer, error) { return []Peer{self, caller}, nil }})
	srv.Handle(Route{Command: "nop", Capability: "ployz.test.nop.v1", Handler: func(context.Context, json.RawMessage) (any, error) { return nil, nil }})
	gp, ga := srv.GRPCServer(), srv.MeshServer(srvID)
	go gp.Serve(pl)
	go ga.Serve(al)
	b.Cleanup(func() { gp.Stop(); ga.Stop() })
	d := MeshDialer{Identity: callerID, Source: netip.MustParseAddr("127.0.0.3")}
	plain = func() *Client {
		c, err := DialTCP(context.Background(), pl.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	auth = func() *Client {
		c, err := d.Dial(context.Background(), self)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	return plain, auth
}
