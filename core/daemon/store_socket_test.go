package daemon

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// impostor holds the store API's old TCP port the way any local user
// could while the store is down, and records what it is sent.
type impostor struct {
	mu    sync.Mutex
	conns int
	auth  []string
}

func (i *impostor) serve(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(StoreAPIPort))
	if err != nil {
		prereq.Missing(t, "a free 127.0.0.1:7571 to stand in for an impostor", err)
	}
	srv := &http.Server{
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				i.mu.Lock()
				i.conns++
				i.mu.Unlock()
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			i.mu.Lock()
			i.auth = append(i.auth, r.Header.Get("Authorization"))
			i.mu.Unlock()
			w.Write([]byte(`{"columns":["id","owner","body","updated_at"]}` + "\n" + // test server
				`{"row":[1,["forged","m1","{}",0]]}` + "\n" + `{"eoq":{"time":0.001}}` + "\n"))
		}),
	}
	go srv.Serve(ln) // closed below
	t.Cleanup(func() { srv.Close() })
}

// TestStoreClientsIgnoreAnImpostorOnTCP: with the store down and another
// process on 127.0.0.1:7571, the store clients the daemon sets up (its
// own, and the dns and ingress plugins' from their specs) reach no TCP
// port, send no token and take no rows: they use the store's socket.
func TestStoreClientsIgnoreAnImpostorOnTCP(t *testing.T) {
	var imp impostor
	imp.serve(t)
	data, run := t.TempDir(), t.TempDir()
	// An older release's token file, which clients must not pick up.
	if err := os.MkdirAll(filepath.Join(data, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "store", "token"), []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{cfg: Config{DataDir: data, RunDir: run}, log: hclog.NewNullLogger(),
		rec: machine.Record{ID: "abc", Phase: machine.Participating, Subnet: netip.MustParsePrefix("10.210.7.0/24")}}
	dnsSpec, err := d.serving().DNSSpec()
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dns.ParseSpec(dnsSpec)
	if err != nil {
		t.Fatal(err)
	}
	ingSpec, err := d.serving().IngressSpec()
	if err != nil {
		t.Fatal(err)
	}
	ic, err := ingress.ParseSpec(ingSpec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	clients := map[string]*store.TokenFileClient{
		"dns":     store.NewTokenFileClient(dc.StoreAPI, dc.StoreTokenFile),
		"ingress": store.NewTokenFileClient(ic.StoreAPI, ic.StoreTokenFile),
		"ployzd":  store.NewTokenFileClient(d.storeSocket(), ""),
	}
	for name, c := range clients {
		if rows, err := c.Containers(ctx); err == nil || len(rows) != 0 {
			t.Errorf("%s's client with the store down: %d rows, %v; want an error and none", name, len(rows), err)
		}
	}
	imp.mu.Lock()
	defer imp.mu.Unlock()
	if imp.conns != 0 || len(imp.auth) != 0 {
		t.Fatalf("the impostor on 127.0.0.1:%d got %d connections, Authorization headers %q", StoreAPIPort, imp.conns, imp.auth)
	}
}
