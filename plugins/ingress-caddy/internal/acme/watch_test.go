package acme

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/store/storetest"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// realStore runs a real store node (the token in dir/token) with three
// participating ingress Machines that read sealed keys, and returns a
// client for the test's writes and the manager's token-file client.
func realStore(t testing.TB) (*store.Client, *store.TokenFileClient) {
	t.Helper()
	node := storetest.Start(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(node.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := store.New(node.API(), store.WithToken(node.Token()))
	for _, id := range []string{"m-a", "m-b", "m-c"} {
		if _, err := c.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: id, Owner: id,
			Body: store.MachineBody{Phase: serving.Participating, Capabilities: []string{ingress.CapHTTP, ingress.CapSealedKeys}}}); err != nil {
			t.Fatal(err)
		}
	}
	return c, store.NewTokenFileClient(node.API(), tok)
}

// putValid writes a certificate row for each hostname, valid for a day
// from an hour ago (far from renewal), its key sealed with keys.
func putValid(t testing.TB, c *store.Client, keys *Sealer, hostnames ...string) {
	t.Helper()
	now := time.Now()
	for _, h := range hostnames {
		certPEM, keyPEM := selfSigned(t, now.Add(-time.Hour), now.Add(24*time.Hour), h)
		sealed, err := keys.Seal(h, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Certificates().Put(context.Background(), store.Row[store.CertificateBody]{Key: h, Owner: "m-a",
			Body: store.CertificateBody{Domains: []string{h}, CertPEM: certPEM, KeyPEM: sealed, Issuer: "m-a"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// pollOnly hides a Store's Watch: the manager polls it every Interval
// (the manager before it followed the store by subscription).
type pollOnly struct{ Store }

// TestIdleCPU measures (PLOYZ_MEASURE_IDLE=1; printed, not gated) the CPU
// this process (the manager and its real store) spends over 20 s with
// five wanted hostnames whose certificates are valid: reading the store
// every second against following it by subscription.
func TestIdleCPU(t *testing.T) {
	if os.Getenv("PLOYZ_MEASURE_IDLE") == "" {
		prereq.Skip(t, "a 40 s measurement, printed and never gating: set PLOYZ_MEASURE_IDLE=1")
	}
	hosts := []string{"a.example.test", "b.example.test", "c.example.test", "d.example.test", "e.example.test"}
	for _, mode := range []struct {
		name string
		st   func(*store.TokenFileClient) Store
	}{
		{"poll every 1s", func(tf *store.TokenFileClient) Store { return pollOnly{tf} }},
		{"store subscriptions", func(tf *store.TokenFileClient) Store { return TokenFileStore{tf} }},
	} {
		c, tf := realStore(t)
		keys := testSealer(t, 1)
		putValid(t, c, keys, hosts...)
		m, err := New(Config{Machine: "m-a", Directory: "https://acme.invalid/dir", Store: mode.st(tf), Keys: keys,
			Verify: func(context.Context, string, []string) error { return fmt.Errorf("no issuance here") }})
		if err != nil {
			t.Fatal(err)
		}
		m.Want(hosts)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		time.Sleep(2 * time.Second)
		if n := len(m.Snapshot().TLS.Certificates); n != len(hosts) {
			t.Fatalf("%s: %d certificates loaded, want %d", mode.name, n, len(hosts))
		}
		before := cpuTime()
		time.Sleep(20 * time.Second)
		used := cpuTime() - before
		cancel()
		<-done
		t.Logf("%s: %s CPU in 20 s (%.3f%% of a core)", mode.name, used.Round(time.Millisecond), 100*used.Seconds()/20)
	}
}

// countingStore counts the manager's reads of a real store it follows
// by subscription.
type countingStore struct {
	TokenFileStore
	reads atomic.Int64
}

func (s *countingStore) Certificates(ctx context.Context) ([]store.Row[store.CertificateBody], error) {
	s.reads.Add(1)
	return s.TokenFileStore.Certificates(ctx)
}

func (s *countingStore) Machines(ctx context.Context) ([]store.Row[store.MachineBody], error) {
	s.reads.Add(1)
	return s.TokenFileStore.Machines(ctx)
}

// runManager runs a manager on st until the test ends; verify receives
// every hostname check (the check fails: nothing is ordered).
func runManager(t *testing.T, st Store, keys *Sealer, verify chan<- string) *Manager {
	t.Helper()
	m, err := New(Config{Machine: "m-a", Directory: "https://acme.invalid/dir", Store: st, Keys: keys,
		Interval: 100 * time.Millisecond, Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}}),
		Verify: func(_ context.Context, h string, _ []string) error {
			verify <- h
			return fmt.Errorf("the test orders nothing")
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// A manager on a real store follows it by subscription: idle (one
// certificate valid, one hostname whose check failed and waits its
// backoff) it reads nothing for 3 s although its poll interval is
// 100 ms, and a certificate another Machine writes is served within a
// second.
func TestFollowsStoreBySubscription(t *testing.T) {
	c, tf := realStore(t)
	keys := testSealer(t, 1)
	putValid(t, c, keys, "a.example.test")
	st := &countingStore{TokenFileStore: TokenFileStore{tf}}
	verify := make(chan string, 10)
	m := runManager(t, st, keys, verify)
	m.Want([]string{"a.example.test", "b.example.test"})
	select {
	case h := <-verify:
		if h != "b.example.test" {
			t.Fatalf("checked %s, want b.example.test (a's certificate is valid)", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b.example.test was never checked")
	}
	waitFor(t, 5*time.Second, "a's certificate loaded", func() error {
		if n := len(m.Snapshot().TLS.Certificates); n != 1 {
			return fmt.Errorf("%d certificates", n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // the subscriptions' first wakes
	before := st.reads.Load()
	time.Sleep(3 * time.Second)
	if n := st.reads.Load() - before; n != 0 {
		t.Fatalf("%d store reads in 3 s with nothing changed: the manager polls", n)
	}
	start := time.Now()
	putValid(t, c, keys, "b.example.test")
	waitFor(t, time.Second, "b's certificate from the store", func() error {
		if n := len(m.Snapshot().TLS.Certificates); n != 2 {
			return fmt.Errorf("%d certificates", n)
		}
		return nil
	})
	t.Logf("a certificate written to the store was served in %s; %d reads", time.Since(start).Round(time.Millisecond), st.reads.Load()-before)
	if len(verify) != 0 {
		t.Fatalf("checked %s again within its backoff", <-verify)
	}
}

// A certificate's renewal comes due by its timer, with no store change
// and the safety read far away: the manager checks the hostname within
// a second of two thirds of its lifetime.
func TestRenewalTimerWithoutStoreChange(t *testing.T) {
	c, tf := realStore(t)
	keys := testSealer(t, 1)
	now := time.Now()
	certPEM, keyPEM := selfSigned(t, now.Add(-4*time.Second), now.Add(3500*time.Millisecond), "r.example.test")
	sealed, _ := keys.Seal("r.example.test", keyPEM)
	if _, err := c.Certificates().Put(context.Background(), store.Row[store.CertificateBody]{Key: "r.example.test", Owner: "m-b",
		Body: store.CertificateBody{Domains: []string{"r.example.test"}, CertPEM: certPEM, KeyPEM: sealed, Issuer: "m-b"}}); err != nil {
		t.Fatal(err)
	}
	leaf, _ := leafOf(t, certPEM) // x509 keeps whole seconds
	renewAt := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
	verify := make(chan string, 10)
	m := runManager(t, TokenFileStore{tf}, keys, verify)
	m.Want([]string{"r.example.test"})
	select {
	case h := <-verify:
		late := time.Since(renewAt)
		t.Logf("renewal of %s checked %s after its renewal time", h, late.Round(time.Millisecond))
		if late < 0 || late > 2*time.Second {
			t.Fatalf("renewal checked %s after its time, want within [0, 2s]", late)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the renewal never came due: no timer, only the safety read")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
