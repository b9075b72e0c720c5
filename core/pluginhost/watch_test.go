package pluginhost_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/sdk/plugintest"
)

// withdrawnWithin kills (sig) the plugin's process and returns how long
// its capability took to be withdrawn, failing past bound.
func withdrawnWithin(t *testing.T, h *pluginhost.Host, pid int, sig syscall.Signal, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	for slices.Contains(h.Capabilities(), testCap) {
		if time.Since(start) > bound {
			t.Fatalf("capability still served %s after %v to pid %d (bound %s)", time.Since(start).Round(time.Millisecond), sig, pid, bound)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// A plugin whose process dies is withdrawn at once, although the health
// check at rest is a minute away: the host wakes on the connection's
// drop and sees the exit (a long-lived plugin's pidfd, a managed one's
// child). The bound is 1 s.
func TestDeathSeenAtOnceAtRest(t *testing.T) {
	slow := func(c *pluginhost.Config) { c.HealthInterval = time.Minute }
	t.Run("long-lived", func(t *testing.T) {
		dir := t.TempDir()
		install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
		h := newHost(t, dir, slow)
		defer h.Close()
		p := plugintest.ServeLongLived(t, bins.lived, statusOf(t, h, "lived").Socket)
		waitFor(t, "attach", func() bool { return statusOf(t, h, "lived").Pid == p.Process.Pid })
		d := withdrawnWithin(t, h, p.Process.Pid, syscall.SIGKILL, time.Second)
		t.Logf("kill -9 of a long-lived plugin withdrawn in %s", d.Round(time.Millisecond))
		if st := statusOf(t, h, "lived"); st.Health != pluginhost.HealthDown {
			t.Fatalf("after the kill: %+v", st)
		}
	})
	t.Run("managed", func(t *testing.T) {
		dir := t.TempDir()
		install(t, dir, bins.alpha, "alpha", pluginhost.LifecycleManaged)
		h := newHost(t, dir, slow, func(c *pluginhost.Config) { c.RestartDelay = 2 * time.Second })
		defer h.Close()
		d := withdrawnWithin(t, h, statusOf(t, h, "alpha").Pid, syscall.SIGKILL, time.Second)
		t.Logf("kill -9 of a managed plugin withdrawn in %s", d.Round(time.Millisecond))
	})
}

// A plugin that stops answering while its process lives (SIGSTOP) is
// withdrawn after two failed checks: within HealthInterval + 2 ×
// healthTimeout (2 s, 1 s for an interval under it) + the recheck
// (1 s, or the interval when shorter).
func TestHungPluginWithdrawnWithinBound(t *testing.T) {
	dir := t.TempDir()
	install(t, dir, bins.lived, "lived", pluginhost.LifecycleLongLived)
	const interval = 500 * time.Millisecond
	h := newHost(t, dir, func(c *pluginhost.Config) { c.HealthInterval = interval })
	defer h.Close()
	p := plugintest.ServeLongLived(t, bins.lived, statusOf(t, h, "lived").Socket)
	waitFor(t, "attach", func() bool { return statusOf(t, h, "lived").Pid == p.Process.Pid })
	defer syscall.Kill(p.Process.Pid, syscall.SIGCONT)
	bound := interval + 2*time.Second + interval + time.Second // 1 s of scheduling slack on a shared host
	d := withdrawnWithin(t, h, p.Process.Pid, syscall.SIGSTOP, bound)
	t.Logf("a stopped plugin withdrawn in %s (bound %s)", d.Round(time.Millisecond), bound)
}
