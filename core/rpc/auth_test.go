package rpc

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/internal/prereq"
)

type meshMachine struct {
	peer  Peer
	id    *Identity
	srv   *Server
	calls atomic.Int64 // whoami calls this Machine ran
}

type meshCluster struct {
	ms    []*meshMachine
	peers []Peer // what every Machine's machines table says; tests edit it
}

// meshCluster starts n authenticated Machine RPC servers on 127.0.0.(2+i),
// the loopback standing in for management addresses on the mesh.
func newMeshCluster(t *testing.T, n int) *meshCluster {
	t.Helper()
	c := &meshCluster{}
	list := func(context.Context) ([]Peer, error) { return append([]Peer(nil), c.peers...), nil }
	for i := range n {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)})
		lis, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			prereq.Missing(t, ip.String()+" on the loopback (Linux routes 127/8 there)", err)
		}
		id := testIdentity(t)
		m := &meshMachine{id: id, peer: Peer{ID: strings.Repeat(string(rune('a'+i)), 32), Name: "m" + string(rune('1'+i)),
			Address: lis.Addr().String(), RPCKey: id.PublicKey(), Phase: PhaseParticipating}}
		m.srv = NewServer(Options{Local: func() (string, string) { return m.peer.ID, m.peer.Name }, Peers: list,
			Dial: MeshDialer{Identity: id, Source: ip}.Dial})
		m.srv.Handle(Route{Command: "whoami", Capability: "ployz.test.whoami.v1", Handler: func(context.Context, json.RawMessage) (any, error) {
			m.calls.Add(1)
			return map[string]string{"id": m.peer.ID}, nil
		}})
		g := m.srv.MeshServer(id)
		go g.Serve(lis)
		t.Cleanup(g.Stop)
		c.ms = append(c.ms, m)
		c.peers = append(c.peers, m.peer)
	}
	return c
}

func testIdentity(t testing.TB) *Identity {
	t.Helper()
	id, err := LoadOrCreateIdentity(filepath.Join(t.TempDir(), IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// operator is the entry's local (unix socket) view of m.
func operator(t *testing.T, m *meshMachine) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := m.srv.GRPCServer()
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	c, err := DialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialAs(t *testing.T, d MeshDialer, p Peer) *Client {
	t.Helper()
	c, err := d.Dial(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantCode(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	s, _ := status.FromError(unwrapStatus(err))
	if err == nil || s.Code() != code || !strings.Contains(s.Message(), substr) {
		t.Fatalf("err = %v; want %v naming %q", err, code, substr)
	}
}

func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

func TestMeshForwardingAndFanoutAuthenticated(t *testing.T) {
	c := newMeshCluster(t, 3)
	op := operator(t, c.ms[0])
	ctx := context.Background()
	var who map[string]string
	if err := op.Call(ctx, Target{One: "m2"}, "whoami", nil, &who); err != nil || who["id"] != c.ms[1].peer.ID {
		t.Fatalf("forward to m2 = %v, %v", who, err)
	}
	res, err := op.Fanout(ctx, Target{All: true}, "whoami", nil)
	if err != nil || res.Partial() || len(res.Results) != 3 {
		t.Fatalf("fan-out = %+v, %v", res, err)
	}
	// Streams forward over the authenticated connection too.
	c.ms[2].srv.HandleStream(StreamRoute{Command: "echo", Capability: "ployz.test.echo.v1", Handler: func(_ context.Context, _ json.RawMessage, s StreamConn) error {
		return s.Send(StreamFrame{Data: []byte("hi")})
	}})
	st, err := op.OpenStream(ctx, Target{One: "m3"}, "echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if f, err := st.Recv(); err != nil || string(f.Data) != "hi" {
		t.Fatalf("forwarded stream frame = %+v, %v", f, err)
	}
}

func TestMeshRefusesNonMembers(t *testing.T) {
	c := newMeshCluster(t, 2)
	target := c.ms[0].peer
	ctx := context.Background()

	// A stranger with its own key, from an address no Machine has.
	stranger := testIdentity(t)
	err := dialAs(t, MeshDialer{Identity: stranger, Source: netip.MustParseAddr("127.0.0.9")}, target).Call(ctx, Target{}, "whoami", nil, nil)
	wantCode(t, err, codes.PermissionDenied, "belongs to no Machine")

	// A stranger forwarding through the entry gets nowhere either.
	err = dialAs(t, MeshDialer{Identity: stranger}, target).Call(ctx, Target{One: "m2"}, "whoami", nil, nil)
	wantCode(t, err, codes.PermissionDenied, "belongs to no Machine")

	// A member's key used from another address (a stolen key off the mesh).
	err = dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.9")}, target).Call(ctx, Target{}, "whoami", nil, nil)
	wantCode(t, err, codes.PermissionDenied, "management address is 127.0.0.3")

	// TLS without a client certificate.
	noCert := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}
	cl, err := newClient(func(ctx context.Context) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", target.Address)
	}, credentials.NewTLS(noCert))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wantCode(t, cl.Call(ctx, Target{}, "whoami", nil, nil), codes.Unauthenticated, "operators connect over SSH")

	// Plain gRPC, as main's clients spoke, gets no answer at all.
	plain, err := DialTCP(ctx, target.Address)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.Call(ctx, Target{}, "whoami", nil, nil); err == nil {
		t.Fatal("a plaintext call was answered")
	}

	// A Machine that is no longer participating, once the cache expires.
	defer func(d time.Duration) { authTTL = d }(authTTL)
	authTTL = 0
	c.peers[1].Phase = "resetting"
	err = dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.3")}, target).Call(ctx, Target{}, "whoami", nil, nil)
	wantCode(t, err, codes.PermissionDenied, `is "resetting", not participating`)

	if n := c.ms[0].calls.Load(); n != 0 {
		t.Fatalf("refused calls ran the handler %d times", n)
	}
	// The same member from its own address is admitted.
	c.peers[1].Phase = PhaseParticipating
	if err := dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.3")}, target).Call(ctx, Target{}, "whoami", nil, nil); err != nil {
		t.Fatalf("member call: %v", err)
	}
}

func TestMeshClientVerifiesServerKey(t *testing.T) {
	c := newMeshCluster(t, 2)
	// The machines table says m2 has another key than the one answering
	// at its address: an impostor. Forwarding refuses, naming both.
	impostor := testIdentity(t)
	c.peers[1].RPCKey = impostor.PublicKey()
	op := operator(t, c.ms[0])
	err := op.Call(context.Background(), Target{One: "m2"}, "whoami", nil, nil)
	if err == nil || !strings.Contains(err.Error(), KeyFingerprint(c.ms[1].id.key.Public().(ed25519.PublicKey))) ||
		!strings.Contains(err.Error(), "machines row publishes") {
		t.Fatalf("forward to an impostor = %v", err)
	}
	if c.ms[1].calls.Load() != 0 {
		t.Fatal("the call reached the impostor's handler")
	}
	// A row without rpc_key is never called unauthenticated.
	c.peers[1].RPCKey = ""
	if err := op.Call(context.Background(), Target{One: "m2"}, "whoami", nil, nil); err == nil || !strings.Contains(err.Error(), "publishes no rpc_key") {
		t.Fatalf("forward to a keyless row = %v", err)
	}
}

func TestIdentityFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", IdentityFile)
	a, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	b, err := LoadOrCreateIdentity(path)
	if err != nil || b.PublicKey() != a.PublicKey() {
		t.Fatalf("reload = %v, %v; want the same key", b, err)
	}
	if _, err := ParseRPCKey(a.PublicKey()); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreateIdentity(path); err == nil || !strings.Contains(err.Error(), "want 0600") {
		t.Fatalf("a world-readable key = %v; want refused", err)
	}
}

// salt_spec_hashes answers a participating Machine over the mesh and is
// refused, naming why, to a stranger: the salt is only for callers that
// could read the Cluster secret anyway.
func TestMeshSaltSpecHashesOnlyForMembers(t *testing.T) {
	c := newMeshCluster(t, 2)
	target := c.ms[0].peer
	ctx := context.Background()
	var ran atomic.Int64
	key := make([]byte, 32)
	c.ms[0].srv.Handle(Route{Command: CmdSaltSpecHashes, Capability: CapSaltSpecHashes, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
		ran.Add(1)
		var req SaltSpecHashesRequest
		if err := Decode(CmdSaltSpecHashes, raw, &req); err != nil {
			return nil, err
		}
		if err := req.Validate(); err != nil {
			return nil, err
		}
		return SaltSpecHashesResult{Hashes: []string{SaltSpecDigest(key, req.Digests[0])}}, nil
	}})
	req := SaltSpecHashesRequest{Digests: []string{strings.Repeat("ab", 32)}}
	stranger := testIdentity(t)
	err := dialAs(t, MeshDialer{Identity: stranger, Source: netip.MustParseAddr("127.0.0.9")}, target).Call(ctx, Target{}, CmdSaltSpecHashes, req, nil)
	wantCode(t, err, codes.PermissionDenied, "belongs to no Machine")
	if ran.Load() != 0 {
		t.Fatal("a stranger's call ran the handler")
	}
	var res SaltSpecHashesResult
	if err := dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.3")}, target).Call(ctx, Target{}, CmdSaltSpecHashes, req, &res); err != nil ||
		len(res.Hashes) != 1 || !strings.HasPrefix(res.Hashes[0], SaltedSpecHashPrefix) {
		t.Fatalf("member: %+v, %v", res, err)
	}
	err = dialAs(t, MeshDialer{Identity: c.ms[1].id, Source: netip.MustParseAddr("127.0.0.3")}, target).Call(ctx, Target{}, CmdSaltSpecHashes, SaltSpecHashesRequest{Digests: []string{"zz"}}, nil)
	var re *Error
	if !errors.As(err, &re) || re.Code != CodeInvalidArgument || re.Details["field"] != "digests[0]" {
		t.Fatalf("bad digest: %v, want invalid_argument naming digests[0]", err)
	}
}
