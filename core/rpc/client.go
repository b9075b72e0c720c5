package rpc

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/ployz/ployz/core/rpc/machinepb"
	"github.com/ployz/ployz/internal/version"
)

// Client calls Machine RPC on one Entry Machine.
type Client struct {
	conn    *grpc.ClientConn
	raw     machinepb.MachineClient
	onClose func() error // releases the transport, e.g. an SSH connection

	mu   sync.Mutex
	wire net.Conn // the byte stream gRPC dialed last, for usable
}

// Dialer opens one byte stream to an Entry Machine's Machine RPC.
type Dialer func(ctx context.Context) (net.Conn, error)

// NewClient returns a Client whose connections come from dial.
func NewClient(dial Dialer) (*Client, error) {
	return newClient(dial, insecure.NewCredentials())
}

func newClient(dial Dialer, creds credentials.TransportCredentials) (*Client, error) {
	c := &Client{}
	conn, err := grpc.NewClient("passthrough:///ployz",
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			w, err := dial(ctx)
			if err == nil {
				c.mu.Lock()
				c.wire = w
				c.mu.Unlock()
			}
			return w, err
		}),
	)
	if err != nil {
		return nil, err
	}
	c.conn, c.raw = conn, machinepb.NewMachineClient(conn)
	return c, nil
}

// usable reports whether a kept Client may carry a new call: its channel
// is not failing or shut down, and the peer has not closed the
// connection it holds. A connection whose close the kernel has received
// but gRPC's reader has not yet handled would otherwise take the call
// and fail it (a restarted Machine's old connection).
func (c *Client) usable() bool {
	switch c.conn.GetState() {
	case connectivity.TransientFailure, connectivity.Shutdown:
		return false
	}
	c.mu.Lock()
	w := c.wire
	c.mu.Unlock()
	return w == nil || !peerClosed(w)
}

// DialUnix returns a Client for the daemon socket at path.
func DialUnix(path string) (*Client, error) {
	return NewClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	})
}

// DialTCP returns a Client for a daemon's mesh address host:port.
func DialTCP(_ context.Context, addr string) (*Client, error) {
	return NewClient(func(ctx context.Context) (net.Conn, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		return d.DialContext(ctx, "tcp", addr)
	})
}

// Close releases the client's connections.
func (c *Client) Close() error {
	err := c.conn.Close()
	if c.onClose != nil {
		c.onClose() // the gRPC close error is the one that matters
	}
	return err
}

// Target routes a call; the zero Target is the entry Machine itself.
type Target struct {
	One string   // one Machine: ID, ID prefix or name
	All bool     // every Machine the entry observes
	Set []string // several Machines
}

func (t Target) ctx(ctx context.Context) context.Context {
	switch {
	case t.All:
		return metadata.AppendToOutgoingContext(ctx, MetaTargets, "*")
	case len(t.Set) > 0:
		return metadata.AppendToOutgoingContext(ctx, MetaTargets, strings.Join(t.Set, ","))
	case t.One != "":
		return metadata.AppendToOutgoingContext(ctx, MetaTarget, t.One)
	}
	return ctx
}

// Call runs command on target with payload and decodes the answer into
// out (when non-nil). A refusal is returned as *Error.
func (c *Client) Call(ctx context.Context, t Target, command string, payload, out any) error {
	resp, err := c.call(ctx, t, command, payload)
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	if out != nil && len(resp.Payload) > 0 {
		if err := json.Unmarshal(resp.Payload, out); err != nil {
			return fmt.Errorf("%s: decode answer: %w", command, err)
		}
	}
	return nil
}

// Fanout runs command on several Machines and returns per-target results.
func (c *Client) Fanout(ctx context.Context, t Target, command string, payload any) (FanoutResult, error) {
	var res FanoutResult
	if !t.All && len(t.Set) == 0 {
		t.All = true
	}
	resp, err := c.call(ctx, t, command, payload)
	if err != nil {
		return res, err
	}
	if resp.Error != nil {
		return res, resp.Error
	}
	if err := json.Unmarshal(resp.Payload, &res); err != nil {
		return res, fmt.Errorf("%s: decode fan-out: %w", command, err)
	}
	return res, nil
}

// CallMajor is Call with an explicit protocol_major, for tests of the
// refusal of another major.
func (c *Client) CallMajor(ctx context.Context, major int, command string, payload any) (Response, error) {
	return c.callMajor(ctx, Target{}, major, command, payload)
}

func (c *Client) call(ctx context.Context, t Target, command string, payload any) (Response, error) {
	return c.callMajor(ctx, t, version.ProtocolMajor, command, payload)
}

func (c *Client) callMajor(ctx context.Context, t Target, major int, command string, payload any) (Response, error) {
	var resp Response
	var p json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return resp, fmt.Errorf("%s: encode payload: %w", command, err)
		}
		p = b
	}
	b, err := json.Marshal(Request{ProtocolMajor: major, Command: command, Payload: p})
	if err != nil {
		return resp, err
	}
	f, err := c.raw.Call(t.ctx(ctx), &machinepb.Frame{Json: b})
	if err != nil {
		return resp, fmt.Errorf("%s: %w", command, err)
	}
	if err := json.Unmarshal(f.GetJson(), &resp); err != nil {
		return resp, fmt.Errorf("%s: malformed answer: %w", command, err)
	}
	return resp, nil
}
