package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/storetest"
)

// testServer is a real store node (core/store/storetest: the SDK's client
// is tested against the store's implementation, which is core's).
type testServer struct{ *storetest.Node }

func startServer(t *testing.T) testServer { return testServer{storetest.Start(t)} }

func (s testServer) client(opts ...Option) *Client {
	return New(s.API(), append([]Option{WithToken(s.Token())}, opts...)...)
}

// defaultedBody is a body whose Defaults fills a field an older writer
// left out.
type defaultedBody struct {
	ProtocolMajor int `json:"protocol_major,omitempty"`
}

func (b *defaultedBody) Defaults() {
	if b.ProtocolMajor == 0 {
		b.ProtocolMajor = 1
	}
}

func TestTypedTablesTolerantBodies(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	for _, c := range []*Client{srv.client(), srv.client(WithH2C())} {
		m := c.Machines()
		if _, err := m.Put(ctx, Row[MachineBody]{Key: "m1", Owner: "m1", Body: MachineBody{Name: "one", Subnet: "10.210.1.0/24"}}); err != nil {
			t.Fatal(err)
		}
		// A newer Machine wrote fields this reader does not know, and an
		// older one left out fields: both must read.
		if _, err := c.Exec(ctx, Stmt(`INSERT INTO machines (id, owner, body) VALUES ('m2', 'm2', ?)
			ON CONFLICT(id) DO UPDATE SET body = excluded.body`, `{"name":"two","future_field":{"x":1}}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, Stmt(`INSERT OR REPLACE INTO machines (id, owner) VALUES ('m3', 'm3')`)); err != nil {
			t.Fatal(err)
		}
		rows, err := m.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 3 || rows[0].Body.Subnet != "10.210.1.0/24" || rows[1].Body.Name != "two" || rows[2].Body.Name != "" {
			t.Fatalf("rows %+v", rows)
		}
		cl := NewTable[defaultedBody](c, "cluster", "id")
		if _, err := c.Exec(ctx, Stmt(`INSERT OR REPLACE INTO cluster (id) VALUES ('c')`)); err != nil {
			t.Fatal(err)
		}
		got, ok, err := cl.Get(ctx, "c")
		if err != nil || !ok || got.Body.ProtocolMajor != 1 {
			t.Fatalf("cluster row %+v ok=%v err=%v (missing field must take its default)", got, ok, err)
		}
		cert := c.Certificates()
		if _, err := cert.Put(ctx, Row[CertificateBody]{Key: "example.com", Owner: "m1", Body: CertificateBody{NotAfter: 9}}); err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Delete(ctx, "example.com"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := cert.Get(ctx, "example.com"); ok {
			t.Fatal("certificate still present after delete")
		}
		for _, tbl := range []string{c.Containers().Name(), c.Serving().Name(), c.ServingAcks().Name()} {
			if _, err := c.Query(ctx, Stmt("SELECT count(*) FROM "+tbl)); err != nil {
				t.Fatalf("table %s: %v", tbl, err)
			}
		}
	}
	var apiErr *APIError
	if _, err := New(srv.API()).Exec(ctx, Stmt("SELECT 1")); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("no token: %v", err)
	}
	if _, err := srv.client().Exec(ctx, Stmt("INSERT INTO machines (id, body) VALUES (NULL, '{}')")); !errors.As(err, &apiErr) || apiErr.Status != 500 || !strings.Contains(apiErr.Msg, "NOT NULL constraint failed: machines.id") {
		t.Fatalf("NOT NULL violation (Corrosion answers 500 naming the constraint): %v", err)
	}
}

func TestWaitCaughtUp(t *testing.T) {
	ctx := context.Background()
	srv := startServer(t)
	c := srv.client()
	res, err := c.Exec(ctx, Stmt(`INSERT INTO volumes (id) VALUES ('v')`))
	if err != nil || res.Version == nil || *res.Version != 1 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if err := c.WaitCaughtUp(ctx, map[string]int64{res.ActorID: 1}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := c.WaitCaughtUp(short, map[string]int64{res.ActorID: 2}, 10*time.Millisecond); err == nil {
		t.Fatal("caught up to a version that does not exist")
	}
}
