package pluginhost_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/pluginhost"
)

// installOnDemand installs bin as plugin name, started only on demand.
func installOnDemand(t *testing.T, dir, bin, name string, lc pluginhost.Lifecycle) pluginhost.Entry {
	t.Helper()
	e, err := pluginhost.InstallEntry(dir, bin, pluginhost.Entry{Name: name, Lifecycle: lc, OnDemand: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// assertIdle checks that plugin name advertises the test capability with
// no process running its binary.
func assertIdle(t *testing.T, h *pluginhost.Host, dir string, e pluginhost.Entry) {
	t.Helper()
	s := statusOf(t, h, e.Name)
	if s.Health != pluginhost.HealthIdle || s.Pid != 0 || !slices.Equal(s.Capabilities, []string{testCap}) || s.Version != "0.0.1-test" {
		t.Fatalf("%s = %+v, want idle with %s advertised", e.Name, s, testCap)
	}
	if !slices.Contains(h.Capabilities(), testCap) || !h.Available(testCap) {
		t.Fatalf("catalog %v does not advertise %s while %s is stopped", h.Capabilities(), testCap, e.Name)
	}
	if n := processesRunning(t, pluginhost.BlobPath(dir, e.SHA256)); n != 0 {
		t.Fatalf("%d processes run the on-demand plugin's binary before any call", n)
	}
}

// TestOnDemandStartsOnFirstCall: an on-demand plugin's capability is
// advertised while no process runs it; the first call starts it and is
// answered by it; concurrent first calls start one process.
func TestOnDemandStartsOnFirstCall(t *testing.T) {
	dir := t.TempDir()
	e := installOnDemand(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	var mu sync.Mutex
	var seen [][]string
	h := newHost(t, dir, func(c *pluginhost.Config) {
		c.OnChange = func(caps []string) { mu.Lock(); seen = append(seen, caps); mu.Unlock() }
	})
	defer h.Close()
	assertIdle(t, h, dir, e)
	mu.Lock()
	if len(seen) == 0 || !slices.Contains(seen[len(seen)-1], testCap) {
		t.Fatalf("OnChange saw %v, want %s advertised", seen, testCap)
	}
	mu.Unlock()

	const callers = 8
	pids := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := callStatus(h)
			errs[i] = err
			if err == nil {
				pids[i] = resp.GetListenAddrs()[0]
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	s := statusOf(t, h, "alpha")
	if s.Health != pluginhost.HealthHealthy || s.Pid == 0 || s.Restarts != 0 {
		t.Fatalf("after the first calls: %+v", s)
	}
	for i, p := range pids {
		if p != strconv.Itoa(s.Pid) {
			t.Fatalf("caller %d was answered by pid %s, the plugin runs as %d", i, p, s.Pid)
		}
	}
	if n := processesRunning(t, pluginhost.BlobPath(dir, e.SHA256)); n != 1 {
		t.Fatalf("%d processes run the plugin after %d concurrent first calls, want 1", n, callers)
	}
}

// TestOnDemandFailedStartRetried: a start that fails is a refusal naming
// the plugin and the capability stays advertised; the next call starts it
// again and succeeds once the cause is gone.
func TestOnDemandFailedStartRetried(t *testing.T) {
	dir := t.TempDir()
	fail := filepath.Join(dir, "fail")
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TESTPLUGIN_FAIL_IF", fail)
	e := installOnDemand(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	h := newHost(t, dir)
	defer h.Close()
	assertIdle(t, h, dir, e)

	_, err := callStatus(h)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `on-demand plugin "alpha" did not start`) {
		t.Fatalf("call to a plugin that cannot start: %v, want unavailable naming alpha", err)
	}
	if c, ok := pluginhost.CapabilityFromError(err); !ok || c != testCap {
		t.Fatalf("refusal names capability %q (%v), want %s", c, ok, testCap)
	}
	s := statusOf(t, h, "alpha")
	if s.Health != pluginhost.HealthIdle || s.Error == "" || !h.Available(testCap) {
		t.Fatalf("after a failed start: %+v (available %v), want idle, advertised, with the error", s, h.Available(testCap))
	}

	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	resp, err := callStatus(h)
	if err != nil {
		t.Fatalf("later call did not start the plugin again: %v", err)
	}
	if s := statusOf(t, h, "alpha"); s.Health != pluginhost.HealthHealthy || resp.GetListenAddrs()[0] != strconv.Itoa(s.Pid) {
		t.Fatalf("after the retry: %+v answered by %v", s, resp.GetListenAddrs())
	}
}

// TestOnDemandStartTimeout: a plugin that does not come up within
// StartTimeout is refused with the bound and the plugin named, not waited
// for without end.
func TestOnDemandStartTimeout(t *testing.T) {
	dir := t.TempDir()
	hang := filepath.Join(dir, "hang")
	if err := os.WriteFile(hang, []byte("hang"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TESTPLUGIN_FAIL_IF", hang)
	e := installOnDemand(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	h := newHost(t, dir, func(c *pluginhost.Config) {
		c.LaunchLongLived = true
		c.StartTimeout = 300 * time.Millisecond
	})
	defer h.Close()
	t.Cleanup(func() { killRunning(t, pluginhost.BlobPath(dir, e.SHA256)) })
	assertIdle(t, h, dir, e)
	start := time.Now()
	_, err := callStatus(h)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), `on-demand plugin "lived" did not start within 300ms`) {
		t.Fatalf("call: %v, want unavailable naming lived and the bound", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the refused call took %s, the bound is 300ms", d)
	}
}

// TestOnDemandWakeAndUpgrade: a binary installed while the plugin is
// stopped is the one advertised and later started; Wake starts it
// without a call.
func TestOnDemandWakeAndUpgrade(t *testing.T) {
	dir := t.TempDir()
	installOnDemand(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	h := newHost(t, dir)
	defer h.Close()

	// Another build of alpha: the same program with bytes appended past
	// its ELF image, so another digest.
	b, err := os.ReadFile(bins.alpha)
	if err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(t.TempDir(), "alpha-next")
	if err := os.WriteFile(next, append(b, []byte("next release")...), 0o755); err != nil {
		t.Fatal(err)
	}
	e := installOnDemand(t, dir, next, "alpha", pluginhost.LifecycleManaged)
	waitFor(t, "the idle plugin to advertise the upgraded binary", func() bool {
		s := statusOf(t, h, "alpha")
		return s.SHA256 == e.SHA256 && s.Health == pluginhost.HealthIdle
	})
	assertIdle(t, h, dir, e)

	if err := h.Wake("alpha"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Wake to start alpha", func() bool { return statusOf(t, h, "alpha").Health == pluginhost.HealthHealthy })
	s := statusOf(t, h, "alpha")
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(s.Pid), "exe"))
	if want, _ := filepath.EvalSymlinks(pluginhost.BlobPath(dir, e.SHA256)); err != nil || exe != want {
		t.Fatalf("started process runs %q (%v), want the upgraded blob %s", exe, err, want)
	}
	if err := h.Wake("nosuch"); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("Wake of an unknown plugin: %v", err)
	}
}

// TestOnDemandLongLivedAttachedAcrossRestart: a long-lived on-demand
// plugin started by a call keeps serving after the host closes, and the
// next host attaches to it rather than leaving it unmanaged and idle.
func TestOnDemandLongLivedAttachedAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := installOnDemand(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	launch := func(c *pluginhost.Config) { c.LaunchLongLived = true }
	h1 := newHost(t, dir, launch)
	assertIdle(t, h1, dir, e)
	resp, err := callStatus(h1)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(resp.GetListenAddrs()[0])
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGTERM) })
	if err := h1.Close(); err != nil {
		t.Fatal(err)
	}
	h2 := newHost(t, dir, launch)
	defer h2.Close()
	if s := statusOf(t, h2, "lived"); s.Health != pluginhost.HealthHealthy || s.Pid != pid {
		t.Fatalf("second host: %+v, want attached to pid %d", s, pid)
	}
}

// killRunning kills the processes whose executable is bin.
func killRunning(t *testing.T, bin string) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == want {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
