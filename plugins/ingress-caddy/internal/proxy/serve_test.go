package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/fsutil"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// fakeSource hands Serve rows directly and records its acks.
type fakeSource struct {
	mu       sync.Mutex
	rows     []store.Row[store.ContainerBody]
	pointers []store.Row[store.ServingBody]
	err      error
	acks     []store.ServingAckBody
}

func (f *fakeSource) setPointers(p []store.Row[store.ServingBody]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pointers = p
}

func (f *fakeSource) lastAck() (store.ServingAckBody, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.acks) == 0 {
		return store.ServingAckBody{}, 0
	}
	return f.acks[len(f.acks)-1], len(f.acks)
}

func (f *fakeSource) set(rows []store.Row[store.ContainerBody], err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows, f.err = rows, err
}

func (f *fakeSource) Input(context.Context) (ingress.Input, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return ingress.Input{Machines: testMachines, Containers: f.rows, Pointers: f.pointers}, f.err
}

func (f *fakeSource) Ack(_ context.Context, _ string, a store.ServingAckBody) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, a)
	return nil
}

// startServe runs Serve on specPath with src; every successful load is
// sent on loads (dropped when full), done delivers Serve's error once
// cancel (or a spec change) ends it.
func startServe(specPath string, src Source) (loads chan ingress.Status, done chan error, cancel context.CancelFunc) {
	loads, done = make(chan ingress.Status, 100), make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- Serve(ctx, Options{SpecPath: specPath, Source: src, Interval: 50 * time.Millisecond,
			OnLoad: func(st ingress.Status) {
				select {
				case loads <- st:
				default:
				}
			}})
	}()
	return loads, done, cancel
}

// freePort returns a loopback address nothing listens on.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(t *testing.T, listen, host, path string) (int, string, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+listen+path, nil)
	req.Host = host
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func webRow(key, machine, upstream string, ready bool, host string) store.Row[store.ContainerBody] {
	u, _ := url.Parse(upstream)
	ip, port, _ := net.SplitHostPort(u.Host)
	var p int
	fmt.Sscan(port, &p)
	return store.Row[store.ContainerBody]{Key: key, Owner: machine, Body: store.ContainerBody{
		Namespace: "demo", Service: strings.Split(host, ".")[0], IP: ip, Ready: ready,
		Ingress: []store.IngressRoute{{Hostname: host, ContainerPort: p}}}}
}

// TestServeRealCaddy runs the embedded Caddy on a loopback port in front
// of real upstreams: nothing listens before the first store read, a ready
// route proxies, a pending one answers 502, /.ployz-verify answers a
// nonce keyed by the Machine id (never the id), a store outage keeps the loaded config, a new ready
// Container is added, and a spec change ends Serve.
func TestServeRealCaddy(t *testing.T) {
	up1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "one ", r.Host) }))
	defer up1.Close()
	up2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "two") }))
	defer up2.Close()

	dir := t.TempDir()
	listen := freePort(t)
	specPath := filepath.Join(dir, "ingress.json")
	statusPath := filepath.Join(dir, "status.json")
	spec := fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		listen, statusPath, filepath.Join(dir, "state"))
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	src := &fakeSource{err: errors.New("store away")}
	loads, done, cancel := startServe(specPath, src)
	defer cancel()

	// Before the first load from the store nothing answers.
	time.Sleep(300 * time.Millisecond)
	if _, _, err := get(t, listen, "web.example.test", "/"); err == nil {
		t.Fatal("answered before the first load from the store")
	}
	if _, err := os.Stat(statusPath); err == nil {
		t.Fatal("status written before the first load")
	}

	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m2", up1.URL, true, "web.example.test"),
		webRow("c2", "m1", up2.URL, false, "web.example.test"),
		webRow("c3", "m1", up1.URL, false, "pending.example.test"),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 2 })

	if code, body, err := get(t, listen, "web.example.test", "/"); err != nil || code != 200 || body != "one web.example.test" {
		t.Fatalf("web: %d %q %v", code, body, err)
	}
	if code, body, err := get(t, listen, "pending.example.test", "/"); err != nil || code != 502 || !strings.Contains(body, "no ready Container") {
		t.Fatalf("pending: %d %q %v", code, body, err)
	}
	// The public answer is keyed by the Machine id but names no Machine.
	if code, body, _ := get(t, listen, "anything.example", "/.ployz-verify?n=n0nce"); code != 200 || strings.TrimSpace(body) != ingress.VerifyAnswer("m1", "n0nce") || strings.Contains(body, "m1") {
		t.Fatalf("verify: %d %q", code, body)
	}
	if code, body, _ := get(t, listen, "anything.example", "/.ployz-verify"); code != 400 || strings.Contains(body, "m1") {
		t.Fatalf("verify without a nonce: %d %q", code, body)
	}
	if code, _, _ := get(t, listen, "unknown.example.test", "/"); code != 404 {
		t.Fatalf("unknown host: %d", code)
	}
	st := readStatus(t, statusPath)
	if st.MachineID != "m1" || !st.Running || len(st.Routes) != 2 ||
		st.Routes[0].Hostname != "pending.example.test" || st.Routes[0].State != ingress.RoutePending ||
		st.Routes[1].State != ingress.RoutePublished || st.Routes[1].Owner != "demo/web" {
		t.Fatalf("status %+v", st)
	}

	// The store goes away: the loaded config keeps serving, the status says so.
	src.set(nil, errors.New("connection refused"))
	deadline := time.Now().Add(10 * time.Second)
	for readStatus(t, statusPath).StoreError == "" {
		if time.Now().After(deadline) {
			t.Fatal("store error never reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, err := get(t, listen, "web.example.test", "/"); err != nil || code != 200 {
		t.Fatalf("during store outage: %d %v", code, err)
	}

	// The local Container becomes ready: it comes first (the "first" policy).
	src.set([]store.Row[store.ContainerBody]{
		webRow("c1", "m2", up1.URL, true, "web.example.test"),
		webRow("c2", "m1", up2.URL, true, "web.example.test"),
	}, nil)
	waitLoad(t, loads, func(st ingress.Status) bool { return len(st.Routes) == 1 && len(st.Routes[0].Upstreams) == 2 })
	if code, body, _ := get(t, listen, "web.example.test", "/"); code != 200 || body != "two" {
		t.Fatalf("local first: %d %q", code, body)
	}
	if st := readStatus(t, statusPath); st.StoreError != "" || st.Routes[0].Upstreams[0] != strings.TrimPrefix(up2.URL, "http://") {
		t.Fatalf("status after recovery %+v", st)
	}

	// A spec change ends Serve so systemd restarts onto it.
	os.WriteFile(specPath, []byte(strings.Replace(spec, `"m1"`, `"m9"`, 1)), 0o644)
	select {
	case err := <-done:
		if !errors.Is(err, ErrSpecChanged) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not notice the spec change")
	}
	if _, _, err := get(t, listen, "web.example.test", "/"); err == nil {
		t.Fatal("still listening after Serve returned")
	}
}

func waitLoad(t *testing.T, loads chan ingress.Status, ok func(ingress.Status) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case st := <-loads:
			if ok(st) {
				return
			}
		case <-deadline:
			t.Fatal("config never loaded")
		}
	}
}

func readStatus(t *testing.T, path string) ingress.Status {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st ingress.Status
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestServeReportsRefusedConfig: when Caddy cannot load even the first
// config (the listen port is taken), the status file says so with
// Running false, and Serve keeps trying.
func TestServeReportsRefusedConfig(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	specPath, statusPath := filepath.Join(dir, "ingress.json"), filepath.Join(dir, "status.json")
	os.WriteFile(specPath, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		taken.Addr().String(), statusPath, filepath.Join(dir, "state"))), 0o644)
	src := &fakeSource{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, Options{SpecPath: specPath, Source: src, Interval: 50 * time.Millisecond}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(statusPath); err == nil {
			var st ingress.Status
			if json.Unmarshal(b, &st) == nil && st.LoadError != "" {
				if st.Running || !strings.Contains(st.LoadError, "address already in use") {
					t.Fatalf("status %+v", st)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("refused config never reported")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// TestServeFollowsAndAcksServingPointer: the proxy routes only to the
// Containers the Serving Pointer names and acks each pointer once its
// loaded config follows it.
func TestServeFollowsAndAcksServingPointer(t *testing.T) {
	oldUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "old") }))
	defer oldUp.Close()
	newUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "new") }))
	defer newUp.Close()
	dir := t.TempDir()
	listen := freePort(t)
	specPath := filepath.Join(dir, "ingress.json")
	if err := os.WriteFile(specPath, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		listen, filepath.Join(dir, "status.json"), filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	src, pointTo := oldAndNew(oldUp.URL, newUp.URL)
	pointTo("p1", "c-old")
	loads, done, cancel := startServe(specPath, src)
	defer func() { cancel(); <-done }()
	acked := func(id string) {
		t.Helper()
		waitLoad(t, loads, func(ingress.Status) bool { a, _ := src.lastAck(); return a.Pointers["demo/web"] == id })
	}
	acked("p1")
	for i := 0; i < 3; i++ {
		if _, body, err := get(t, listen, "web.example.test", "/"); err != nil || body != "old" {
			t.Fatalf("pointer p1: %q %v", body, err)
		}
	}
	pointTo("p2", "c-new")
	acked("p2")
	for i := 0; i < 3; i++ {
		if _, body, err := get(t, listen, "web.example.test", "/"); err != nil || body != "new" {
			t.Fatalf("pointer p2: %q %v", body, err)
		}
	}
	if _, n := src.lastAck(); n != 2 {
		t.Errorf("%d ack writes, want one per pointer", n)
	}
}

// oldAndNew is a source with web.example.test's Containers c-old and
// c-new on m1 at oldURL and newURL, and a pointTo that moves the
// Service's Serving Pointer (id) to one of them.
func oldAndNew(oldURL, newURL string) (*fakeSource, func(id, container string)) {
	src := &fakeSource{}
	src.set([]store.Row[store.ContainerBody]{
		webRow("c-old", "m1", oldURL, true, "web.example.test"),
		webRow("c-new", "m1", newURL, true, "web.example.test"),
	}, nil)
	return src, func(id, container string) {
		src.setPointers([]store.Row[store.ServingBody]{{Key: "demo/web", Body: store.ServingBody{ID: id,
			Containers: []store.ServingContainer{{ID: container, Machine: "m1"}}}}})
	}
}

// testMachines are m1 and m2 participating. The tests' upstreams are
// loopback test backends, so each Machine's subnet here is 127.0.0.0/8
// (in a Cluster they are disjoint /24s of the Cluster network; a row's
// address is checked only against its own owner's subnet).
var testMachines = serving.Machines{Subnets: map[string]netip.Prefix{
	"m1": netip.MustParsePrefix("127.0.0.0/8"), "m2": netip.MustParsePrefix("127.0.0.0/8"),
	"m3": netip.MustParsePrefix("127.0.0.0/8")}}

// TestSpecChangeWithoutPoll: with the store round and the spec check an
// hour apart, ployzd's rewrite of the spec (by rename) still ends Serve
// within a second: the spec file is followed by inotify, not a poll.
func TestSpecChangeWithoutPoll(t *testing.T) {
	defer func(d time.Duration) { specCheck = d }(specCheck)
	specCheck = time.Hour
	dir := t.TempDir()
	specPath := filepath.Join(dir, "ingress.json")
	spec := fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":"127.0.0.1:1","status_file":%q,"state_dir":%q}`,
		freePort(t), filepath.Join(dir, "status.json"), filepath.Join(dir, "state"))
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	loads, done := make(chan ingress.Status, 10), make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- Serve(ctx, Options{SpecPath: specPath, Source: &fakeSource{}, Interval: time.Hour,
			OnLoad: func(st ingress.Status) {
				select {
				case loads <- st:
				default:
				}
			}})
	}()
	waitLoad(t, loads, func(ingress.Status) bool { return true })
	// Other files in the directory change without ending Serve.
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, "other.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve ended on another file's change: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	changed := time.Now()
	if err := fsutil.WriteFileAtomic(specPath, []byte(strings.Replace(spec, `"m1"`, `"m9"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrSpecChanged) {
			t.Fatalf("Serve: %v", err)
		}
		t.Logf("spec change noticed in %s", time.Since(changed).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not notice the spec change without its poll")
	}
}
