package dns

import (
	"context"
	"slices"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/sdk/store"
)

// TestFollowsStoreBySubscription: with polling slowed to a minute, only
// the store subscription can carry changes. A Container whose row stops
// saying Ready leaves the answers within a second of the write, and a
// Serving Pointer written to the store is followed as soon as it lands.
func TestFollowsStoreBySubscription(t *testing.T) {
	st := startStore(t)
	st.put(
		deployed("old1", "m1", "10.210.1.2", "d1", true),
		deployed("old2", "m2", "10.210.2.2", "d1", true),
		deployed("new1", "m1", "10.210.1.3", "d2", true),
	)
	listen := freeAddr(t, "udp4")
	spec := writeSpec(t, t.TempDir(), listen, st)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Options{SpecPath: spec, Interval: time.Minute, Log: logger(t),
			OnServing: func(*Handler) { close(served) }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("no first load")
	}
	answers := func() []string {
		r, err := query(t, listen, "web.demo-prod.internal", miekg.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		got := answerIPs(r)
		slices.Sort(got)
		return got
	}
	if got := answers(); !slices.Equal(got, []string{"10.210.1.2", "10.210.1.3", "10.210.2.2"}) {
		t.Fatalf("first load: %v", got)
	}
	within := func(what string, d time.Duration, want []string) time.Duration {
		t.Helper()
		start := time.Now()
		for !slices.Equal(answers(), want) {
			if time.Since(start) > d {
				t.Fatalf("%s: still %v after %s, want %v", what, answers(), d, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}

	// A crash: the row withdraws readiness.
	crashed := deployed("old2", "m2", "10.210.2.2", "d1", false)
	crashed.Body.State = "exited"
	st.put(crashed)
	took := within("the crashed Container leaves", time.Second, []string{"10.210.1.2", "10.210.1.3"})
	t.Logf("crashed Container left the answers %s after its row changed", took)

	// The Serving Pointer lands: only what it names answers.
	p := pointerTo("p2", "new1")
	if _, err := st.client().Serving().Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	took = within("the pointer is followed", time.Second, []string{"10.210.1.3"})
	t.Logf("Serving Pointer followed %s after it was written", took)

	// The store restarts: the subscription resumes and changes still arrive.
	st.Stop()
	time.Sleep(200 * time.Millisecond)
	st.Restart()
	st.put(deployed("new2", "m2", "10.210.2.3", "d2", true))
	p.Body.Containers = append(p.Body.Containers, store.ServingContainer{ID: "new2"})
	p.Body.ID = "p3"
	if _, err := st.client().Serving().Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	within("a change after a store restart", 10*time.Second, []string{"10.210.1.3", "10.210.2.3"})
}
