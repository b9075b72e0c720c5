package rpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

const testPurpose = "port 7574 is the volume transport between Machines"

// portOf starts m's PortServer serving receive_volume (a handler that
// counts the bytes it reads) on its management address, and answers m's
// peer at that port.
func portOf(t *testing.T, m *meshMachine) Peer {
	t.Helper()
	m.srv.HandleStream(StreamRoute{Command: CmdReceiveVolume, Capability: "ployz.volume.receive.v1", Handler: func(_ context.Context, _ json.RawMessage, s StreamConn) error {
		var n int
		for {
			f, err := s.Recv()
			if err != nil {
				return err
			}
			if f.EOF {
				b, _ := json.Marshal(VolumeReceived{Bytes: uint64(n)})
				return s.Send(StreamFrame{Event: b})
			}
			n += len(f.Data)
		}
	}})
	ip := hostOf(m.peer.Address)
	lis, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	g := m.srv.PortServer(m.id, testPurpose, CmdReceiveVolume)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return m.peer.AtPort(lis.Addr().(*net.TCPAddr).Port)
}

// streamErr opens command on c and answers the stream's first error.
func streamErr(c *Client, t Target, command string) error {
	st, err := c.OpenStream(context.Background(), t, command, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	st.CloseSend() // Recv says what happened
	for {
		f, err := st.Recv()
		if err != nil {
			return err
		}
		if f.Done {
			return nil
		}
	}
}

// TestPortServesOnlyItsCommandsToMembers: the volume transport's port
// takes receive_volume from a member Machine, refuses every other
// command naming the port's purpose, forwards nothing, and admits no
// stranger, no member key from another address and no client without a
// certificate (real listeners, real clients).
func TestPortServesOnlyItsCommandsToMembers(t *testing.T) {
	c := newMeshCluster(t, 2)
	port := portOf(t, c.ms[0])
	ctx := context.Background()
	member := dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: hostOf(c.ms[1].peer.Address)}, port)

	st, err := member.OpenStream(ctx, Target{}, CmdReceiveVolume, ReceiveVolumeRequest{Volume: "db"})
	if err != nil {
		t.Fatal(err)
	}
	st.SendRawData()
	for range 3 {
		if err := st.Send(StreamFrame{Data: make([]byte, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	st.CloseSend()
	var got VolumeReceived
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) || f.Done {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Event) > 0 {
			json.Unmarshal(f.Event, &got)
		}
	}
	st.Close()
	if got.Bytes != 3000 {
		t.Fatalf("receive_volume on the port read %d bytes, want 3000", got.Bytes)
	}

	// Any other command, unary or stream, is refused naming the purpose.
	var e *Error
	if err := member.Call(ctx, Target{}, "whoami", nil, nil); !errors.As(err, &e) || e.Code != CodeUnsupported || !strings.Contains(e.Message, testPurpose) {
		t.Fatalf("whoami on the port: %v", err)
	}
	if c.ms[0].calls.Load() != 0 {
		t.Fatal("the port ran a command it does not serve")
	}
	if err := streamErr(member, Target{}, CmdSendVolume); !errors.As(err, &e) || !strings.Contains(e.Message, testPurpose) || e.Details["command"] != CmdSendVolume {
		t.Fatalf("send_volume on the port: %v", err)
	}
	if err := member.Call(ctx, Target{}, CmdReceiveVolume, nil, nil); !errors.As(err, &e) || !strings.Contains(e.Message, "streaming command") {
		t.Fatalf("receive_volume as a call on the port: %v", err)
	}
	// Nothing is forwarded from the port.
	if err := streamErr(member, Target{One: "m2"}, CmdReceiveVolume); !errors.As(err, &e) || !strings.Contains(e.Message, "not forwarded") {
		t.Fatalf("a forward through the port: %v", err)
	}

	// A stranger, a member's key off its address, no certificate.
	stranger := testIdentity(t)
	err = streamErr(dialAs(t, MeshDialer{Identity: stranger, Source: netip.MustParseAddr("127.0.0.9")}, port), Target{}, CmdReceiveVolume)
	wantCode(t, err, codes.PermissionDenied, "belongs to no Machine")
	err = streamErr(dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.9")}, port), Target{}, CmdReceiveVolume)
	wantCode(t, err, codes.PermissionDenied, "management address is 127.0.0.3")
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	cl, err := newClient(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", port.Address)
	}, credentials.NewTLS(noCert))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wantCode(t, streamErr(cl, Target{}, CmdReceiveVolume), codes.Unauthenticated, "operators connect over SSH")
}

func TestPeerAtPort(t *testing.T) {
	p := Peer{Address: "[fdcc::1]:7569"}
	if got := p.AtPort(7574).Address; got != "[fdcc::1]:7574" {
		t.Fatalf("AtPort = %s", got)
	}
	if got := (Peer{}).AtPort(7574).Address; got != "" {
		t.Fatalf("AtPort without an address = %q", got)
	}
}
