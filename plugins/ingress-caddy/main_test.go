package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/plugintest"
	"github.com/ployz/ployz/sdk/store"
)

// TestBinaryServesFromStore builds ployz-ingress-caddy and runs it the way
// ployz-plugin@ingress-caddy.service does (`serve --socket`) with no spec:
// it advertises HTTP and TCP, takes its spec through Configure and restarts
// onto it; restarted (as systemd would), it serves the kept spec against a
// real store: a Container row with a hostname route is reached through the
// proxy, `status` prints the loaded route, and Info names the plugin.
func TestBinaryServesFromStore(t *testing.T) {
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/ingress-caddy")
	p := plugintest.Start(t, bin)
	if p.Info.GetName() != "ingress-caddy" || p.Info.GetKind() != "ingress" {
		t.Fatalf("Info = %v", p.Info)
	}

	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from upstream") }))
	defer up.Close()
	_, upPort, _ := net.SplitHostPort(up.Listener.Addr().String())
	port, _ := strconv.Atoi(upPort)

	dir := t.TempDir()
	node := storetest.Start(t)
	api := node.API()
	st := store.New(api, store.WithToken(node.Token()))
	// m1's Container is a loopback test backend: its subnet is 127.0.0.0/8.
	if _, err := st.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: "m1", Owner: "m1",
		Body: store.MachineBody{Phase: "participating", Subnet: "127.0.0.0/8"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Containers().Put(context.Background(), store.Row[store.ContainerBody]{Key: "c1", Owner: "m1",
		Body: store.ContainerBody{Service: "web", Namespace: "demo", IP: "127.0.0.1", Ready: true,
			Ingress: []store.IngressRoute{{Hostname: "web.example.test", ContainerPort: port}}}}); err != nil {
		t.Fatal(err)
	}
	// Forged ready rows: cloud metadata in m1's name, and the proxy's own
	// loopback from a Machine that does not participate. Neither is
	// proxied; status reports both.
	for _, f := range []struct{ key, owner, ip string }{{"evil-meta", "m1", "169.254.169.254"}, {"evil-lo", "m9", "127.0.0.1"}} {
		if _, err := st.Containers().Put(context.Background(), store.Row[store.ContainerBody]{Key: f.key, Owner: f.owner,
			Body: store.ContainerBody{Service: f.key, Namespace: "demo", IP: f.ip, Ready: true,
				Ingress: []store.IngressRoute{{Hostname: f.key + ".example.test", ContainerPort: port}}}}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600)
	listen := freePort(t)
	status := filepath.Join(dir, "status.json")
	spec, _ := json.Marshal(map[string]any{"machine": "m1", "listen": listen, "store_api": api,
		"store_token_file": filepath.Join(dir, "token"), "status_file": status, "state_dir": filepath.Join(dir, "state")})
	socket := filepath.Join(dir, "ingress.sock")
	kept := filepath.Join(dir, "kept", "ingress.json")
	serve := func() *exec.Cmd { return plugintest.ServeLongLived(t, bin, socket, "--spec", kept) }
	first := serve()
	lp := plugintest.Attach(t, socket)
	if caps := lp.Info.GetCapabilities(); !slices.Equal(caps, []string{ingress.CapHTTP, ingress.CapTCP, ingress.CapRoutes, ingress.CapRedirects, ingress.CapUpstreamProtocol}) {
		t.Fatalf("capabilities before any spec: %v", caps)
	}
	lp.Configure(t, spec)
	// The first configuration restarts the process onto its spec.
	for end := time.Now().Add(10 * time.Second); syscall.Kill(first.Process.Pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the process did not restart onto its first spec")
		}
	}
	serve()
	if caps := plugintest.Attach(t, socket).Info.GetCapabilities(); !slices.Equal(caps, []string{ingress.CapHTTP, ingress.CapTCP, ingress.CapRoutes, ingress.CapRedirects, ingress.CapUpstreamProtocol}) {
		t.Fatalf("capabilities with HTTPS off: %v", caps)
	}

	var body string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
		req.Host = "web.example.test"
		resp, err := (&http.Client{Timeout: time.Second}).Do(req)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if body = string(b); resp.StatusCode == 200 {
			break
		}
	}
	if body != "hello from upstream" {
		t.Fatalf("through the proxy: %q", body)
	}
	out, err := exec.Command(bin, "status", "--file", status).Output()
	var s ingress.Status
	if err != nil || json.Unmarshal(out, &s) != nil || len(s.Routes) != 1 || s.Routes[0].State != ingress.RoutePublished || s.MachineID != "m1" {
		t.Fatalf("status: %v %s", err, out)
	}
	skipped := map[string]string{}
	for _, sk := range s.Skipped {
		skipped[sk.Container] = sk.Reason
	}
	if !strings.Contains(skipped["evil-meta"], "169.254.169.254") || !strings.Contains(skipped["evil-lo"], "127.0.0.1") {
		t.Fatalf("status does not report the forged rows: %s", out)
	}
	for _, host := range []string{"evil-meta.example.test", "evil-lo.example.test"} {
		req, _ := http.NewRequest("GET", "http://"+listen+"/", nil)
		req.Host = host
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), "hello from upstream") {
			t.Fatalf("%s: %d %q, want no route", host, resp.StatusCode, b)
		}
	}
	if out, err := exec.Command(bin, "status", "--file", filepath.Join(dir, "none.json")).CombinedOutput(); err == nil || !strings.Contains(string(out), "none.json") {
		t.Fatalf("status of a missing file: %v %s", err, out)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
