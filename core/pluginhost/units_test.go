package pluginhost_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/sdk/plugintest"
)

// fakeUnits plays systemd for ployz-plugin@<name>.service: Start runs
// <dir>/bin/<name> serve on the plugin's socket (what the template unit's
// ExecStart does), Restart stops that process and starts the link again.
type fakeUnits struct {
	t         *testing.T
	dir, sock string

	mu    sync.Mutex
	calls []string
	cmds  map[string]*exec.Cmd
}

func (f *fakeUnits) record(verb, unit string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, verb+" "+unit)
	return strings.TrimSuffix(strings.TrimPrefix(unit, "ployz-plugin@"), ".service")
}

func (f *fakeUnits) Start(_ context.Context, unit string) error {
	name := f.record("start", unit)
	f.run(name)
	return nil
}

func (f *fakeUnits) Restart(_ context.Context, unit string) error {
	name := f.record("restart", unit)
	f.mu.Lock()
	old := f.cmds[name]
	f.mu.Unlock()
	if old != nil {
		_ = old.Process.Signal(syscall.SIGTERM)
		_, _ = old.Process.Wait()
	}
	f.run(name)
	return nil
}

func (f *fakeUnits) run(name string) {
	cmd := plugintest.ServeLongLived(f.t, pluginhost.LinkPath(f.dir, name), filepath.Join(f.sock, name+".sock"))
	f.mu.Lock()
	f.cmds[name] = cmd
	f.mu.Unlock()
}

func (f *fakeUnits) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// variant writes a copy of bin with extra trailing bytes: the same program
// under another sha256, as a new release would be.
func variant(t *testing.T, bin, tag string) string {
	t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), filepath.Base(bin))
	if err := os.WriteFile(p, append(b, []byte("\nployz-test-"+tag)...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnitsStartVerifyAndSwitchByDigest: with Units the host starts a
// long-lived plugin's unit when no process serves it; installing another
// digest restarts the unit onto it once the new blob verifies; a tampered
// blob is refused naming both digests while the running process keeps
// serving, untouched.
func TestUnitsStartVerifyAndSwitchByDigest(t *testing.T) {
	dir := t.TempDir()
	units := &fakeUnits{t: t, dir: dir, sock: filepath.Join(dir, "run"), cmds: map[string]*exec.Cmd{}}
	first := install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	h := newHost(t, dir, func(c *pluginhost.Config) { c.Units = units })
	defer h.Close()

	s := statusOf(t, h, "lived")
	if s.Health != pluginhost.HealthHealthy || !s.Launched || s.SHA256 != first.SHA256 {
		t.Fatalf("after start: %+v", s)
	}
	if got := units.Calls(); len(got) != 1 || got[0] != "start ployz-plugin@lived.service" {
		t.Fatalf("unit calls = %v", got)
	}

	// A new release: verified, then the unit restarts onto it.
	second := install(t, dir, variant(t, bins.lived, "2"), "lived", pluginhost.LifecycleLongLived)
	waitFor(t, "switch onto the second digest", func() bool {
		st := statusOf(t, h, "lived")
		return st.Health == pluginhost.HealthHealthy && st.SHA256 == second.SHA256 && st.RunningSHA256 == "" && st.Pid != s.Pid
	})
	if _, err := callStatus(h); err != nil {
		t.Fatal(err)
	}
	running := statusOf(t, h, "lived")

	// A third release whose blob is altered after install: refused.
	third := install(t, dir, variant(t, bins.lived, "3"), "lived", pluginhost.LifecycleLongLived)
	blob := pluginhost.BlobPath(dir, third.SHA256)
	f, err := os.OpenFile(blob, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("tampered")
	f.Close()
	tampered, err := pluginhost.FileDigest(blob)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tampered blob refused", func() bool {
		return strings.Contains(statusOf(t, h, "lived").Error, "upgrade refused")
	})
	st := statusOf(t, h, "lived")
	for _, d := range []string{third.SHA256, tampered, second.SHA256} {
		if !strings.Contains(st.Error, d) {
			t.Errorf("refusal does not name %s: %s", d, st.Error)
		}
	}
	time.Sleep(300 * time.Millisecond) // several health rounds
	st = statusOf(t, h, "lived")
	if st.Health != pluginhost.HealthHealthy || st.Pid != running.Pid || st.RunningSHA256 != second.SHA256 {
		t.Fatalf("the running process must keep serving: %+v", st)
	}
	if _, err := callStatus(h); err != nil {
		t.Fatalf("call while the upgrade is refused: %v", err)
	}
	if got := units.Calls(); len(got) != 2 {
		t.Fatalf("unit calls = %v, want one start and one restart", got)
	}
}

// TestSetConfigReachesPlugin: what the daemon supplies replaces the
// manifest config, now and at every later attach.
func TestSetConfigReachesPlugin(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
	h := newHost(t, dir)
	defer h.Close()
	if err := h.SetConfig(context.Background(), "alpha", []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	err := h.SetConfig(context.Background(), "alpha", []byte(`{"reject":true}`))
	if err == nil || !strings.Contains(err.Error(), "config asks to be rejected") {
		t.Fatalf("a config the plugin refuses: %v", err)
	}
	if err := h.SetConfig(context.Background(), "nope", nil); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("SetConfig of an unknown plugin: %v", err)
	}
}
