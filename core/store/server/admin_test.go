package server

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
	"github.com/ployz/ployz/sdk/store"
)

func adminCall(t *testing.T, path string, cmd any) []json.RawMessage {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := WriteFrame(c, cmd); err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for {
		var v json.RawMessage
		if err := ReadFrame(c, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
		if string(v) == `"Success"` || len(v) > 8 && string(v[:8]) == `{"Error"` {
			return out
		}
	}
}

// TestAdminSocketMembership checks Ping, MembershipStates (up, then down
// after a peer crashes) and RTTs over the framed admin socket.
func TestAdminSocketMembership(t *testing.T) {
	dir := t.TempDir()
	c := newTestCluster(t, 3, 7, func(i int, cfg *Config) {
		cfg.AdminPath = filepath.Join(dir, "admin"+string(rune('0'+i))+".sock")
		cfg.APIAddr, cfg.Token = "127.0.0.1:0", "membership-token"
	})
	// The store API's GET /v1/membership gives the same view to readers
	// without the admin socket (Internal DNS, the ingress).
	api := store.New(c.node(0).APIAddr(), store.WithToken("membership-token"))
	apiState := func(site string) string {
		m, err := api.Membership(context.Background())
		if err != nil {
			t.Fatalf("GET /v1/membership: %v", err)
		}
		for _, x := range m.Members {
			if x.Site == site {
				return x.State
			}
		}
		return ""
	}
	sock := filepath.Join(dir, "admin0.sock")
	if got := adminCall(t, sock, "Ping"); len(got) != 1 || string(got[0]) != `"Success"` {
		t.Fatalf("Ping: %s", got)
	}
	type member struct {
		JSON struct {
			ID    string  `json:"id"`
			State string  `json:"state"`
			RTT   float64 `json:"rtt_ms"`
		} `json:"json"`
	}
	states := func(cmd string) map[string]member {
		out := map[string]member{}
		frames := adminCall(t, sock, map[string]string{"Cluster": cmd})
		for _, f := range frames[:len(frames)-1] {
			var m member
			if err := json.Unmarshal(f, &m); err != nil {
				t.Fatal(err)
			}
			out[m.JSON.ID] = m
		}
		return out
	}
	peer := c.node(2).Engine().Site()
	waitFor(t, detectWait(10*time.Second), "both peers up with an RTT", func() bool {
		s, r := states("MembershipStates"), states("Rtts")
		return len(s) == 2 && s[peer].JSON.State == "up" && r[peer].JSON.RTT > 0
	})
	if st := apiState(peer); st != "up" {
		t.Fatalf("the API's view of the peer: %q, want up", st)
	}
	// A reader that last saw nothing down waits: its read is held until
	// the peer is down, then answers with it.
	held := make(chan store.Membership, 1)
	go func() {
		m, err := api.MembershipChange(context.Background(), "", time.Minute)
		if err != nil {
			t.Error(err)
		}
		held <- m
	}()
	select {
	case m := <-held:
		t.Fatalf("a waiting read answered with nothing down: %+v", m)
	case <-time.After(time.Second):
	}
	c.node(2).Close()
	select {
	case m := <-held:
		if !m.Waits || m.DownKey() != peer {
			t.Fatalf("held read answered %+v, want the crashed peer down and waits", m)
		}
	case <-time.After(detectWait(30 * time.Second)):
		t.Fatal("a waiting read did not answer once the peer was down")
	}
	waitFor(t, detectWait(15*time.Second), "crashed peer marked down", func() bool {
		return states("MembershipStates")[peer].JSON.State == "down"
	})
	if st := apiState(peer); st != store.MemberDown {
		t.Fatalf("the API's view of the crashed peer: %q, want down", st)
	}
	if down := (store.Membership{Members: []store.Member{{Site: peer, State: apiState(peer)}}}).DownSites(); !down[peer] {
		t.Fatalf("DownSites: %v", down)
	}
	if got := adminCall(t, sock, "Nope"); len(got) != 1 || string(got[0][:8]) != `{"Error"` {
		t.Fatalf("unknown command: %s", got)
	}
}

// TestAdminReloadAddsColumn changes a schema file and reloads it through
// the admin socket: additive changes apply, destructive ones are refused.
func TestAdminReloadAddsColumn(t *testing.T) {
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "schema", "kv.sql")
	if err := os.MkdirAll(filepath.Dir(schemaFile), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(sql string) {
		if err := os.WriteFile(schemaFile, []byte(sql), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT NOT NULL DEFAULT '');`)
	sock := filepath.Join(dir, "admin.sock")
	n := startAPINode(t, "", func(c *Config) {
		c.SchemaSQL = ""
		c.SchemaPaths = []string{filepath.Dir(schemaFile)}
		c.AdminPath = sock
	})
	write(`CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT NOT NULL DEFAULT '', extra INTEGER NOT NULL DEFAULT 3);`)
	if got := adminCall(t, sock, "Reload"); string(got[len(got)-1]) != `"Success"` {
		t.Fatalf("Reload: %s", got)
	}
	if _, _, err := n.Engine().Exec(context.Background(), []crdt.Stmt{{Query: `INSERT INTO kv (k) VALUES ('a')`}}); err != nil {
		t.Fatal(err)
	}
	var extra int
	if err := n.Engine().ReadDB().QueryRow(`SELECT extra FROM kv WHERE k = 'a'`).Scan(&extra); err != nil || extra != 3 {
		t.Fatalf("extra = %d, %v", extra, err)
	}
	write(`CREATE TABLE kv (k TEXT PRIMARY KEY NOT NULL, v TEXT NOT NULL DEFAULT '');`)
	got := adminCall(t, sock, "Reload")
	if !strings.Contains(string(got[len(got)-1]), "table kv column extra: removing a column") {
		t.Fatalf("destructive Reload: %s", got)
	}
}
