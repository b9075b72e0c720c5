package daemon

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	"github.com/ployz/ployz/sdk/store"
)

// storeDaemon is a participating Daemon on a real store node of its own
// (no mesh, no plugins): what the Serving Pointer handlers and the retire
// loop read and write.
func storeDaemon(t testing.TB, self string) (*Daemon, *store.Client) {
	t.Helper()
	addr := freeAddr(t)
	n, err := server.Start(context.Background(), server.Config{
		DBPath: filepath.Join(t.TempDir(), "store.db"), SchemaSQL: schema.SQL(), APIAddr: addr, Token: "tok",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	st := store.New(addr, store.WithToken("tok"))
	d := &Daemon{cfg: Config{DataDir: t.TempDir(), RunDir: t.TempDir()}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: self, Name: "self", Phase: machine.Participating}, active: &active{store: st}}
	return d, st
}

func hcall(t testing.TB, h Handler, req any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), raw)
}

// freeAddr is a loopback TCP address nothing listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Handler is a Machine RPC handler as the daemon registers it.
type Handler = func(context.Context, json.RawMessage) (any, error)

// TestRetireRound runs the retire loop's round against real Docker and a
// real store: a running Container the Service's pointer left out is
// stopped once every participating Machine that is not Down acked that
// pointer, and not before; the Container the pointer names keeps running.
func TestRetireRound(t *testing.T) {
	ctx := context.Background()
	ops := newTestOps(t)
	d, st := storeDaemon(t, "m-self")
	d.ctrs = ops.containerOps
	svc := ops.Namespace + "/web"
	run := func(name string) string {
		t.Helper()
		c, err := ops.Cli.ContainerCreate(ctx, &container.Config{Image: ops.Image, Labels: map[string]string{
			rpc.LabelNamespace: ops.Namespace, rpc.LabelService: "web", rpc.LabelKind: "service"}}, nil, nil, nil, ops.Namespace+"-"+name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ops.Cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) }) // best effort
		if err := ops.Cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Containers().Put(ctx, store.Row[store.ContainerBody]{Key: c.ID, Owner: "m-self",
			Body: store.ContainerBody{Namespace: ops.Namespace, Service: "web", State: "running", Deployment: "d1"}}); err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	running := func(id string) bool {
		in, err := ops.Cli.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return in.State.Running
	}
	oldC, newC := run("old"), run("new")
	time.Sleep(10 * time.Millisecond) // the pointer moves after both were created
	featuretest.PutMachine(t, st, "m-self", "self", machine.Participating)
	featuretest.PutMachine(t, st, "m-two", "two", machine.Participating)
	pointer := store.ServingBody{ID: "p2", Deployment: "d1", MovedAt: time.Now().UnixMilli(),
		Containers: []store.ServingContainer{{ID: newC, Machine: "m-self", Deployment: "d1"}}}
	if _, err := st.Serving().Put(ctx, store.Row[store.ServingBody]{Key: svc, Owner: "m-self", Body: pointer}); err != nil {
		t.Fatal(err)
	}
	featuretest.PutAck(t, st, "m-self", svc, "p2")

	firstSeen := map[string]time.Time{}
	if err := d.retireRound(ctx, firstSeen); err != nil {
		t.Fatal(err)
	}
	if !running(oldC) || !running(newC) {
		t.Fatal("a Container stopped before m-two acked the pointer that left it out")
	}
	if _, ok := firstSeen[oldC]; !ok || len(firstSeen) != 1 {
		t.Fatalf("first seen %v, want only the superseded Container", firstSeen)
	}

	featuretest.PutAck(t, st, "m-two", svc, "p2")
	if err := d.retireRound(ctx, firstSeen); err != nil {
		t.Fatal(err)
	}
	if !running(oldC) {
		t.Fatal("stopped within retireHold of being first seen superseded: a Deploy about to name it again has no time to")
	}
	firstSeen[oldC] = firstSeen[oldC].Add(-retireHold)
	if err := d.retireRound(ctx, firstSeen); err != nil {
		t.Fatal(err)
	}
	if running(oldC) {
		t.Error("the superseded Container still runs after every Machine acked")
	}
	if !running(newC) {
		t.Error("the Container the pointer names was stopped")
	}
}
