package proxy

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// TestAcceptsGzip: gzip or * without q=0, case and spaces aside.
func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"gzip": true, "br, GZIP": true, "gzip;q=0.5": true, "*": true, "deflate, gzip ; q=1": true,
		"": false, "br": false, "gzip;q=0": false, "gzip; q=0.0": false, "identity": false, "x-gzip2": false,
	} {
		if got := acceptsGzip([]string{v}); got != want {
			t.Errorf("Accept-Encoding %q: %v, want %v", v, got, want)
		}
	}
}

// TestServeCompressRealCaddy runs Serve (embedded Caddy) with a route that
// has compress on and one without: a textual answer is gzipped for a
// client that accepts gzip (no length, Vary, weak ETag), left alone for
// one that does not, for an image, for an answer the Container encoded
// itself and on the route without compress; a streamed answer still
// arrives chunk by chunk.
func TestServeCompressRealCaddy(t *testing.T) {
	page := strings.Repeat("<p>hello, compressed world</p>\n", 200)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/png":
			w.Header().Set("Content-Type", "image/png")
		case "/encoded":
			w.Header().Set("Content-Type", "text/html")
			w.Header().Set("Content-Encoding", "br")
		case "/stream":
			w.Header().Set("Content-Type", "text/plain")
			for i := 0; i < 3; i++ {
				fmt.Fprintf(w, "line %d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(400 * time.Millisecond)
			}
			return
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("ETag", `"v1"`)
		}
		io.WriteString(w, page)
	}))
	t.Cleanup(backend.Close)
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		routeRow("c-z", "z", backend, store.IngressRoute{Hostname: "z.example.test", Options: routeopt.Options{Compress: true}}),
		routeRow("c-plain", "plain", backend, store.IngressRoute{Hostname: "plain.example.test"}),
	}, nil)
	listen := freePort(t)
	loads, done, cancel := startServe(writeSpec(t, listen), src)
	t.Cleanup(func() { cancel(); <-done })
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(host, path, accept string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest("GET", "http://"+listen+path, nil)
		r.Host = host
		if accept != "" {
			r.Header.Set("Accept-Encoding", accept) // set: the client does not decode it for us
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatalf("%s%s: %v", host, path, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	resp := get("z.example.test", "/", "br, gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength != -1 || resp.Header.Get("Vary") != "Accept-Encoding" || resp.Header.Get("ETag") != `W/"v1"` {
		t.Fatalf("compressed answer: encoding %q length %d vary %q etag %q", resp.Header.Get("Content-Encoding"), resp.ContentLength, resp.Header.Get("Vary"), resp.Header.Get("ETag"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(zr); err != nil || string(b) != page {
		t.Fatalf("decoded %d bytes (%v), want the page's %d", len(b), err, len(page))
	}
	for _, c := range []struct{ host, path, accept string }{
		{"z.example.test", "/", ""}, {"z.example.test", "/", "gzip;q=0"}, {"z.example.test", "/png", "gzip"},
		{"plain.example.test", "/", "gzip"},
	} {
		resp := get(c.host, c.path, c.accept)
		if b, _ := io.ReadAll(resp.Body); resp.Header.Get("Content-Encoding") != "" || string(b) != page {
			t.Errorf("%s%s accepting %q: encoding %q, %d bytes: want the page as is", c.host, c.path, c.accept, resp.Header.Get("Content-Encoding"), len(b))
		}
	}
	if resp := get("z.example.test", "/encoded", "gzip"); resp.Header.Get("Content-Encoding") != "br" {
		t.Errorf("an answer the Container encoded: %q, want br untouched", resp.Header.Get("Content-Encoding"))
	}

	start := time.Now()
	zr, err = gzip.NewReader(get("z.example.test", "/stream", "gzip").Body)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(zr).ReadString('\n')
	if err != nil || line != "line 0\n" || time.Since(start) > 700*time.Millisecond {
		t.Errorf("first streamed line %q (%v) after %s: want it before the rest", line, err, time.Since(start))
	}
}
