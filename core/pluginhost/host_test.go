package pluginhost_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/sdk/plugintest"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

func newHost(t *testing.T, dir string, mutate ...func(*pluginhost.Config)) *pluginhost.Host {
	t.Helper()
	cfg := pluginhost.Config{
		Dir:            dir,
		SocketDir:      filepath.Join(dir, "run"),
		HealthInterval: 100 * time.Millisecond,
		RestartDelay:   100 * time.Millisecond,
		Logger:         hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: os.Stderr}),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	h, err := pluginhost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func install(t *testing.T, dir, bin, name string, lc pluginhost.Lifecycle) pluginhost.Entry {
	t.Helper()
	e, err := pluginhost.Install(dir, bin, name, lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func statusOf(t *testing.T, h *pluginhost.Host, name string) pluginhost.PluginStatus {
	t.Helper()
	for _, s := range h.Status() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no status for plugin %q", name)
	return pluginhost.PluginStatus{}
}

// callStatus calls the test capability through the host's routing.
func callStatus(h *pluginhost.Host) (*dnsv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var resp *dnsv1.StatusResponse
	err := h.Call(ctx, testCap, func(ctx context.Context, c *grpc.ClientConn) error {
		var err error
		resp, err = dnsv1.NewDNSClient(c).Status(ctx, &dnsv1.StatusRequest{})
		return err
	})
	return resp, err
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNegotiatesHighestCommonVersion: host speaks 1,2; alpha speaks 1,2,3
// and gets 2; omega speaks 5,6, is refused and named, and alpha keeps
// serving.
func TestNegotiatesHighestCommonVersion(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	install(t, dir, bins.omega, "omega", pluginhost.LifecycleManaged)
	h := newHost(t, dir, func(c *pluginhost.Config) { c.APIVersions = []uint32{1, 2} })
	defer h.Close()

	a := statusOf(t, h, "alpha")
	if a.Health != pluginhost.HealthHealthy || a.APIVersion != 2 {
		t.Fatalf("alpha = %+v, want healthy on API v2", a)
	}
	if !slices.Equal(a.Capabilities, []string{testCap}) {
		t.Fatalf("alpha capabilities = %v", a.Capabilities)
	}
	o := statusOf(t, h, "omega")
	if o.Health != pluginhost.HealthRefused {
		t.Fatalf("omega = %+v, want refused", o)
	}
	for _, want := range []string{`"omega"`, "no plugin-API version in common", "[5 6]", "[1 2]"} {
		if !strings.Contains(o.Error, want) {
			t.Errorf("omega error %q lacks %q", o.Error, want)
		}
	}
	if _, err := callStatus(h); err != nil {
		t.Fatalf("alpha stopped serving after omega was refused: %v", err)
	}
}

// TestHandshakeMismatchRefused: a binary speaking another go-plugin
// protocol version is refused with an error that says so.
func TestHandshakeMismatchRefused(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.bad, "bad", pluginhost.LifecycleManaged)
	install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	h := newHost(t, dir)
	defer h.Close()
	b := statusOf(t, h, "bad")
	if b.Health != pluginhost.HealthRefused {
		t.Fatalf("bad = %+v, want refused", b)
	}
	for _, want := range []string{`plugin "bad" refused`, "handshake mismatch", "Plugin version: 99"} {
		if !strings.Contains(b.Error, want) {
			t.Errorf("error %q lacks %q", b.Error, want)
		}
	}
	if statusOf(t, h, "alpha").Health != pluginhost.HealthHealthy {
		t.Fatal("alpha not healthy next to a refused plugin")
	}
}

// TestTamperedBinaryRefused: a blob whose content changed after install is
// never executed; the error names the plugin and both digests.
func TestTamperedBinaryRefused(t *testing.T) {
	dir := t.TempDir()
	e := install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	blob := pluginhost.BlobPath(dir, e.SHA256)
	f, err := os.OpenFile(blob, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("tampered"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := pluginhost.FileDigest(blob)
	if err != nil {
		t.Fatal(err)
	}

	h := newHost(t, dir)
	defer h.Close()
	s := statusOf(t, h, "alpha")
	if s.Health != pluginhost.HealthRefused || s.Pid != 0 {
		t.Fatalf("alpha = %+v, want refused and never started", s)
	}
	for _, want := range []string{`"alpha"`, e.SHA256, got, "refusing to run it"} {
		if !strings.Contains(s.Error, want) {
			t.Errorf("error %q lacks %q", s.Error, want)
		}
	}
	var mismatch *pluginhost.DigestMismatchError
	if err := pluginhost.VerifyBinary("alpha", blob, e.SHA256); !errors.As(err, &mismatch) {
		t.Fatalf("VerifyBinary = %v, want *DigestMismatchError", err)
	}
}

// TestStatusKeepsDroppedStoreEvents: the dropped store events a plugin's
// Info reports reach its status at attach and stay current after: the
// test plugin counts one more on each Info, so a count past the first
// proves the health ticks ask again.
func TestStatusKeepsDroppedStoreEvents(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	h := newHost(t, dir)
	defer h.Close()
	first := statusOf(t, h, "alpha").StoreEventsDropped["serving"]
	if n := statusOf(t, h, "alpha").RefusedContainerRows; n != 3 {
		t.Errorf("refused containers rows %d, want the Info's 3", n)
	}
	if first < 1 {
		t.Fatalf("status after attach: %+v, want the Info's dropped events", statusOf(t, h, "alpha"))
	}
	waitFor(t, "a later Info's count", func() bool { return statusOf(t, h, "alpha").StoreEventsDropped["serving"] > first })
}

// TestKill9ManagedRestart: SIGKILL a managed plugin; its capability is
// withdrawn and calls are refused naming it; the host restarts the plugin
// and the capability comes back.
func TestKill9ManagedRestart(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	changes := make(chan []string, 64)
	h := newHost(t, dir, func(c *pluginhost.Config) {
		c.RestartDelay = 500 * time.Millisecond // long enough to observe the gap
		c.OnChange = func(caps []string) { changes <- caps }
	})
	defer h.Close()

	before := statusOf(t, h, "alpha")
	resp, err := callStatus(h)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetListenAddrs()[0] != strconv.Itoa(before.Pid) {
		t.Fatalf("answered by pid %v, status says %d", resp.GetListenAddrs(), before.Pid)
	}
	if err := syscall.Kill(before.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "capability withdrawn", func() bool { return !slices.Contains(h.Capabilities(), testCap) })
	if h.Available(testCap) {
		t.Fatal("Available true for a withdrawn capability")
	}
	_, err = callStatus(h)
	if c, ok := pluginhost.CapabilityFromError(err); !ok || c != testCap {
		t.Fatalf("call after kill: err %v, details.capability %q", err, c)
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("refusal code %v, want Unavailable", status.Code(err))
	}

	waitFor(t, "plugin restarted", func() bool {
		s := statusOf(t, h, "alpha")
		return s.Health == pluginhost.HealthHealthy && s.Pid != before.Pid
	})
	after := statusOf(t, h, "alpha")
	if after.Restarts != 1 || !slices.Equal(h.Capabilities(), []string{testCap}) {
		t.Fatalf("after restart: %+v, catalog %v", after, h.Capabilities())
	}
	resp, err = callStatus(h)
	if err != nil || resp.GetListenAddrs()[0] != strconv.Itoa(after.Pid) {
		t.Fatalf("call after restart: %v, %v", resp, err)
	}
	// OnChange saw the capability, its withdrawal, and its return.
	var seen [][]string
	for len(changes) > 0 {
		seen = append(seen, <-changes)
	}
	if len(seen) < 3 || len(seen[len(seen)-2]) != 0 || !slices.Equal(seen[len(seen)-1], []string{testCap}) {
		t.Fatalf("OnChange calls = %v", seen)
	}
}

// TestLongLivedSurvivesHostRestart: the first host launches a long-lived
// plugin and closes; the plugin keeps answering; a second host re-attaches
// to the same pid and starts no second process.
func TestLongLivedSurvivesHostRestart(t *testing.T) {
	dir := t.TempDir()
	e := install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	launch := func(c *pluginhost.Config) { c.LaunchLongLived = true }

	h1 := newHost(t, dir, launch)
	s1 := statusOf(t, h1, "lived")
	if s1.Health != pluginhost.HealthHealthy || !s1.Launched || s1.Pid == 0 {
		t.Fatalf("first host: %+v", s1)
	}
	t.Cleanup(func() { _ = syscall.Kill(s1.Pid, syscall.SIGTERM) })
	if _, err := callStatus(h1); err != nil {
		t.Fatal(err)
	}
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}

	// With no host at all, the plugin still answers on its socket.
	direct := plugintest.Attach(t, s1.Socket)
	st, err := dnsv1.NewDNSClient(direct.Conn).Status(context.Background(), &dnsv1.StatusRequest{})
	if err != nil || st.GetListenAddrs()[0] != strconv.Itoa(s1.Pid) {
		t.Fatalf("plugin not answering while no host runs: %v, %v", st, err)
	}

	h2 := newHost(t, dir, launch)
	defer h2.Close()
	s2 := statusOf(t, h2, "lived")
	if s2.Health != pluginhost.HealthHealthy || s2.Pid != s1.Pid || s2.Launched {
		t.Fatalf("second host: %+v, want healthy re-attach to pid %d without launching", s2, s1.Pid)
	}
	if n := processesRunning(t, pluginhost.BlobPath(dir, e.SHA256)); n != 1 {
		t.Fatalf("%d processes run the plugin binary, want 1", n)
	}
	resp, err := callStatus(h2)
	if err != nil || resp.GetListenAddrs()[0] != strconv.Itoa(s1.Pid) {
		t.Fatalf("call through second host: %v, %v", resp, err)
	}
}

// processesRunning counts live processes whose executable is bin.
func processesRunning(t *testing.T, bin string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == want {
			n++
		}
	}
	return n
}

// TestLongLivedRestartedByItsUnit: a host that does not launch plugins
// (production: systemd does) reports the plugin down until a process
// serves its socket, withdraws its capability when that process is killed,
// and attaches to the replacement process — what a unit restart or an
// upgrade looks like from ployzd.
func TestLongLivedRestartedByItsUnit(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	h := newHost(t, dir)
	defer h.Close()
	s := statusOf(t, h, "lived")
	if s.Health != pluginhost.HealthDown || !strings.Contains(s.Error, "ployz-plugin@lived.service") {
		t.Fatalf("no process yet: %+v", s)
	}
	if _, err := callStatus(h); err == nil {
		t.Fatal("call succeeded with no plugin process")
	}

	first := plugintest.ServeLongLived(t, bins.lived, s.Socket)
	waitFor(t, "attach to first process", func() bool {
		return statusOf(t, h, "lived").Pid == first.Process.Pid
	})
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "capability withdrawn", func() bool { return len(h.Capabilities()) == 0 })
	_, err := callStatus(h)
	if c, ok := pluginhost.CapabilityFromError(err); !ok || c != testCap {
		t.Fatalf("call while down: %v", err)
	}

	second := plugintest.ServeLongLived(t, bins.lived, s.Socket)
	waitFor(t, "attach to replacement", func() bool {
		st := statusOf(t, h, "lived")
		return st.Health == pluginhost.HealthHealthy && st.Pid == second.Process.Pid
	})
	if st := statusOf(t, h, "lived"); st.Launched || st.Restarts != 1 {
		t.Fatalf("after replacement: %+v", st)
	}
	resp, err := callStatus(h)
	if err != nil || resp.GetListenAddrs()[0] != strconv.Itoa(second.Process.Pid) {
		t.Fatalf("call after replacement: %v, %v", resp, err)
	}
}
