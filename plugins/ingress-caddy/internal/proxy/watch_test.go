package proxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// TestServeFollowsStoreSubscriptions runs Serve on a real store node:
// with the safety poll far away (SafetyPoll), a readiness withdrawal and
// its return reach the routing table through the store subscriptions in
// well under a second, and a Machine's session change (machines table)
// does too.
func TestServeFollowsStoreSubscriptions(t *testing.T) {
	dir := t.TempDir()
	api, c := startStore(t, dir)
	tokenFile := filepath.Join(dir, "token")
	ctx := context.Background()
	backend := namedBackend(t, "web")
	put := func(ready bool, session string) {
		r := webRow("c1", "m2", backend.URL, ready, "web.example.test")
		r.Body.Session = session
		if _, err := c.Containers().Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Machines().Put(ctx, store.Row[store.MachineBody]{Key: "m2", Owner: "m2", Body: store.MachineBody{Session: "s1", Phase: serving.Participating, Subnet: loopbackSubnet}}); err != nil {
		t.Fatal(err)
	}
	put(true, "s1")

	listen := freePort(t)
	spec := storeSpec(t, dir, listen, api, tokenFile)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Serve(sctx, Options{SpecPath: spec}) }()
	defer func() {
		cancel()
		<-done
	}()
	upstreams := func() int {
		t := table.Load()
		if t == nil || t.route("web.example.test", "/") == nil {
			return -1
		}
		return len(t.route("web.example.test", "/").dials)
	}
	within := func(what string, want int, d time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < d {
			if upstreams() == want {
				return time.Since(start)
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatalf("%s: not in the routing table after %s (upstreams %d)", what, d, upstreams())
		return 0
	}
	within("first read", 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond) // subscriptions established
	put(false, "s1")
	t.Logf("readiness withdrawal reached the routing table in %s", within("withdrawal", 0, time.Second))
	put(true, "s1")
	t.Logf("readiness reached the routing table in %s", within("ready again", 1, time.Second))
	if _, err := c.Machines().Put(ctx, store.Row[store.MachineBody]{Key: "m2", Owner: "m2", Body: store.MachineBody{Session: "s2", Phase: serving.Participating, Subnet: loopbackSubnet}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("a new session of the Container's Machine reached the routing table in %s", within("new session", 0, time.Second))
	if code, body, err := get(t, listen, "web.example.test", "/"); err != nil || code != 502 {
		t.Fatalf("stale readiness still routed: %d %q %v", code, body, err)
	}
}

// loopbackSubnet is the subnet of the test Machines whose Containers are
// loopback test backends.
const loopbackSubnet = "127.0.0.0/8"

// startStore runs a real store node (its token also written to
// dir/token) and returns its API address and a client.
func startStore(t testing.TB, dir string) (string, *store.Client) {
	node := storetest.Start(t)
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(node.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return node.API(), store.New(node.API(), store.WithToken(node.Token()))
}

func storeSpec(t testing.TB, dir, listen, api, tokenFile string) string {
	spec := filepath.Join(dir, "ingress.json")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`{"machine":"m1","listen":%q,"store_api":%q,"store_token_file":%q,"status_file":%q,"state_dir":%q}`,
		listen, api, tokenFile, filepath.Join(dir, "status.json"), filepath.Join(dir, "state"))), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestIdleCPU measures (PLOYZ_MEASURE_IDLE=1; printed, not gated) the CPU
// this process spends over 20 s on an idle ingress and its store, 20
// Containers in the store: polling every 500 ms (as before) against
// following the store's subscriptions.
func TestIdleCPU(t *testing.T) {
	if os.Getenv("PLOYZ_MEASURE_IDLE") == "" {
		prereq.Skip(t, "a 40 s measurement, printed and never gating: set PLOYZ_MEASURE_IDLE=1")
	}
	for _, mode := range []struct {
		name     string
		interval time.Duration
	}{{"poll every 500ms", PollInterval}, {"store subscriptions", 0}} {
		dir := t.TempDir()
		api, c := startStore(t, dir)
		if _, err := c.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: "m2", Owner: "m2",
			Body: store.MachineBody{Phase: serving.Participating, Subnet: "10.0.0.0/24"}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			r := webRow(fmt.Sprintf("c%d", i), "m2", fmt.Sprintf("http://10.0.0.%d:80", i+1), true, "web.example.test")
			if _, err := c.Containers().Put(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Serve(ctx, Options{SpecPath: storeSpec(t, dir, freePort(t), api, filepath.Join(dir, "token")), Interval: mode.interval})
		}()
		time.Sleep(2 * time.Second)
		before := cpuTime()
		time.Sleep(20 * time.Second)
		used := cpuTime() - before
		cancel()
		<-done
		t.Logf("%s: %s CPU in 20 s (%.2f%% of a core)", mode.name, used.Round(time.Millisecond), 100*used.Seconds()/20)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
