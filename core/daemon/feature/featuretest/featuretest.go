// Package featuretest is the test kit of the daemon's features
// (core/daemon/feature/...): a host over a real store node, and calls
// through a route's JSON as Machine RPC makes them. Only tests import it.
package featuretest

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	"github.com/ployz/ployz/core/store/storetest"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// StoreHost is Machine Self over a store, with its own data directory.
type StoreHost struct {
	St   *sdkstore.Client
	Self string
	Dir  string
}

// Store answers the store client.
func (h StoreHost) Store() (*sdkstore.Client, error) { return h.St, nil }

// MachineID answers Self.
func (h StoreHost) MachineID() string { return h.Self }

// DataDir answers Dir.
func (h StoreHost) DataDir() string { return h.Dir }

// Store starts a store node for tb and answers Machine self over it.
func Store(tb testing.TB, self string) (StoreHost, *sdkstore.Client) {
	tb.Helper()
	n := storetest.Start(tb)
	st := sdkstore.New(n.API(), sdkstore.WithToken(n.Token()))
	return StoreHost{St: st, Self: self, Dir: tb.TempDir()}, st
}

// Call sends req as its JSON to h, as the route would.
func Call(tb testing.TB, h rpc.Handler, req any) (any, error) {
	tb.Helper()
	raw, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	return h(context.Background(), raw)
}

// Decode sends req as its JSON to h within a minute, as the route would,
// and decodes the answer into T through JSON, as a caller would.
func Decode[T any](tb testing.TB, h rpc.Handler, req any) (T, error) {
	tb.Helper()
	var out T
	raw, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h(ctx, raw)
	if err != nil {
		return out, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		tb.Fatalf("decode %T: %v", out, err)
	}
	return out, nil
}

// Must is Decode failing the test on an error.
func Must[T any](tb testing.TB, h rpc.Handler, req any) T {
	tb.Helper()
	out, err := Decode[T](tb, h, req)
	if err != nil {
		tb.Fatalf("%T: %v", req, err)
	}
	return out
}

// PutMachine writes Machine id's row with its name and phase.
func PutMachine(tb testing.TB, st *sdkstore.Client, id, name string, phase machine.Phase) {
	tb.Helper()
	if _, err := st.Machines().Put(context.Background(), sdkstore.Row[sdkstore.MachineBody]{Key: id, Owner: id,
		Body: sdkstore.MachineBody{Name: name, Phase: string(phase)}}); err != nil {
		tb.Fatal(err)
	}
}

// PutAck writes machineID's serving ack of svc's pointer.
func PutAck(tb testing.TB, st *sdkstore.Client, machineID, svc, pointer string) {
	tb.Helper()
	if _, err := st.ServingAcks().Put(context.Background(), sdkstore.Row[sdkstore.ServingAckBody]{Key: machineID, Owner: machineID,
		Body: sdkstore.ServingAckBody{Pointers: map[string]string{svc: pointer}, Loaded: time.Now().UnixMilli()}}); err != nil {
		tb.Fatal(err)
	}
}

// Code is err's Machine RPC error code ("" for another error).
func Code(err error) string {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Detail is err's Machine RPC error detail key (nil for another error).
func Detail(err error, key string) any {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Details[key]
	}
	return nil
}

// Typed is h as a route's untyped handler.
func Typed[Req, Resp any](h func(context.Context, Req) (Resp, error)) rpc.Handler {
	return rpc.Method[Req, Resp]{Name: "test"}.Handler(h)
}

// ClusterSecret writes a new Cluster secret into dataDir, for a feature
// that seals with it.
func ClusterSecret(tb testing.TB, dataDir string) {
	tb.Helper()
	secret, err := sdkstore.NewClusterSecret()
	if err != nil {
		tb.Fatal(err)
	}
	if err := store.WriteClusterSecretFile(store.ClusterSecretPath(dataDir), secret); err != nil {
		tb.Fatal(err)
	}
}

// Handler is the handler routes serve cmd with; the test fails without
// one.
func Handler(tb testing.TB, routes []rpc.Route, cmd string) rpc.Handler {
	tb.Helper()
	for _, r := range routes {
		if r.Command == cmd {
			return r.Handler
		}
	}
	tb.Fatalf("no route serves %s", cmd)
	return nil
}

// Serve serves routes and streams as Machine RPC on a unix socket for
// the test's length and answers a client of it, for a test that drives
// a feature as the operator library does.
func Serve(tb testing.TB, routes []rpc.Route, streams []rpc.StreamRoute) *rpc.Client {
	tb.Helper()
	srv := rpc.NewServer(rpc.Options{})
	for _, r := range streams {
		srv.HandleStream(r)
	}
	for _, r := range routes {
		srv.Handle(r)
	}
	return ServeServer(tb, srv)
}

// ServeServer serves srv on a unix socket until the test ends and
// answers a client of it, as ployzd's socket would.
func ServeServer(tb testing.TB, srv *rpc.Server) *rpc.Client {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pzf") // a socket path must fit in 108 bytes
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	lis, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(lis) // ends with Stop
	tb.Cleanup(g.Stop)
	c, err := rpc.DialUnix(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// FreeAddr is a loopback TCP address nothing listens on right now.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartNode starts a store node on dbPath serving its API on addr with
// token "tok" and fast timers, gossiping with boot (none: alone, as if
// partitioned); it is closed when tb ends.
func StartNode(tb testing.TB, dbPath, addr string, boot []string) *server.Node {
	tb.Helper()
	n, err := server.Start(context.Background(), server.Config{DBPath: dbPath, SchemaSQL: schema.SQL(),
		GossipKey: make([]byte, 32), Fast: true, SyncInterval: 100 * time.Millisecond,
		GossipAddr: "127.0.0.1:0", Bootstrap: boot, APIAddr: addr, Token: "tok"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	return n
}

// GossipingPair starts two store nodes that gossip with each other and
// answers their API addresses (token "tok"), once each sees the other.
func GossipingPair(tb testing.TB) (addr1, addr2 string) {
	tb.Helper()
	addr1, addr2 = FreeAddr(tb), FreeAddr(tb)
	n1 := StartNode(tb, filepath.Join(tb.TempDir(), "one.db"), addr1, nil)
	StartNode(tb, filepath.Join(tb.TempDir(), "two.db"), addr2, []string{n1.GossipAddr()})
	for _, a := range []string{addr1, addr2} {
		WaitMembers(tb, sdkstore.New(a, sdkstore.WithToken("tok")))
	}
	return addr1, addr2
}

// WaitMembers waits until st's node sees another member.
func WaitMembers(tb testing.TB, st *sdkstore.Client) {
	tb.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h, err := st.Health(context.Background()); err == nil && h.Members > 0 {
			return
		}
	}
	tb.Fatal("store nodes never saw each other")
}
