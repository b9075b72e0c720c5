package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// TestForwardHeaders: the upstream sees the client's Host, X-Forwarded-*
// set by the proxy (a client's own are replaced: no client is trusted),
// no hop-by-hop header, and the client gets the upstream's status,
// headers and body as sent.
func TestForwardHeaders(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Up", "1")
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprintf(w, "host=%s xff=%s proto=%s xfh=%s conn=%q te=%q", r.Host, r.Header.Get("X-Forwarded-For"),
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-Host"), r.Header.Get("Connection"), r.Header.Get("X-Hop"))
	}))
	defer up.Close()
	listen := serveOneRoute(t, up.URL, "web.example.test")

	req, _ := http.NewRequest("GET", "http://"+listen+"/x", nil)
	req.Host = "web.example.test"
	req.Header.Set("X-Forwarded-For", "6.6.6.6")
	req.Header.Set("X-Forwarded-Host", "evil.test")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "dropped")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	want := `host=web.example.test xff=127.0.0.1 proto=http xfh=web.example.test conn="" te=""`
	if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Up") != "1" || string(b) != want {
		t.Fatalf("got %d X-Up=%q %q, want 418 X-Up=1 %q", resp.StatusCode, resp.Header.Get("X-Up"), b, want)
	}
}

// TestForwardUpgrade: a connection upgrade (as WebSocket does) passes
// through the proxy and both directions flow until the client closes.
func TestForwardUpgrade(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		rw.Flush()
		for {
			line, err := rw.ReadString('\n')
			if err != nil {
				return
			}
			rw.WriteString("echo " + line)
			rw.Flush()
		}
	}))
	defer up.Close()
	listen := serveOneRoute(t, up.URL, "ws.example.test")

	req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
	req.Host = "ws.example.test"
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("upgrade answered %d %q", resp.StatusCode, b)
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("101 body is %T, not a connection", resp.Body)
	}
	r := bufio.NewReader(conn)
	for _, msg := range []string{"one", "two"} {
		if _, err := io.WriteString(conn, msg+"\n"); err != nil {
			t.Fatal(err)
		}
		done := make(chan string, 1)
		go func() { l, _ := r.ReadString('\n'); done <- l }()
		select {
		case got := <-done:
			if strings.TrimSpace(got) != "echo "+msg {
				t.Fatalf("through the upgraded connection: %q, want %q", got, "echo "+msg)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no echo through the upgraded connection")
		}
	}
}

// serveOneRoute runs the proxy with one ready Container serving host at
// upstream and returns its listen address once the route is loaded.
func serveOneRoute(t *testing.T, upstream, host string) string {
	listen := freePort(t)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{webRow("c1", "m1", upstream, true, host)}, nil)
	loads := serveSpec(t, listen, src)
	waitLoad(t, loads, func(st rpc.IngressStatus) bool { return len(st.Routes) == 1 })
	return listen
}
