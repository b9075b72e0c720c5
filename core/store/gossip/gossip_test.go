package gossip

import (
	"crypto/rand"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// fast is false under STORE_TEST_PRODUCTION_TIMERS=1 (make unit runs the
// store's replication tests once so): members then use the timers a
// Machine uses, and waits stretch to match.
var fast = os.Getenv("STORE_TEST_PRODUCTION_TIMERS") == ""

// timers returns the fast-timer duration, or prod under production timers.
func timers(fastD, prod time.Duration) time.Duration {
	if fast {
		return fastD
	}
	return prod
}

func TestFaultsVerdict(t *testing.T) {
	f := NewFaults(1)
	if drop, _ := f.verdict("a", "b"); drop {
		t.Fatal("zero faults dropped a message")
	}
	f.Partition([]string{"a"}, []string{"b", "c"})
	if drop, _ := f.verdict("a", "b"); !drop {
		t.Fatal("partition let a reach b")
	}
	if drop, _ := f.verdict("b", "c"); drop {
		t.Fatal("partition cut b from c in the same group")
	}
	f.Heal()
	f.SetLoss(1, 0)
	if drop, _ := f.verdict("b", "c"); !drop {
		t.Fatal("loss 1.0 delivered a message")
	}
	f.SetLoss(0, 10*time.Millisecond)
	if drop, d := f.verdict("b", "c"); drop || d >= 10*time.Millisecond {
		t.Fatalf("delay verdict drop=%v d=%v", drop, d)
	}
	f.Heal()
	f.SetLatency(10*time.Millisecond, 5*time.Millisecond)
	f.Heal() // the simulated network's latency is not a fault: it stays
	lo, hi := time.Hour, time.Duration(0)
	for i := 0; i < 1000; i++ {
		drop, d := f.verdict("b", "c")
		if drop {
			t.Fatal("latency dropped a message")
		}
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 5*time.Millisecond || hi > 15*time.Millisecond || hi-lo < 8*time.Millisecond {
		t.Fatalf("latency 10±5 ms gave delays from %s to %s", lo, hi)
	}
}

// TestTrafficCounts checks that a member counts the packets it sends and
// both directions of the streams it dials, and nothing it only receives.
func TestTrafficCounts(t *testing.T) {
	a, err := Start(Config{Name: "a", Bind: "127.0.0.1:0", Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := Start(Config{Name: "b", Bind: "127.0.0.1:0", Fast: true, Bootstrap: []string{a.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for a.Member("b") == nil || b.Member("a") == nil {
		if time.Now().After(deadline) {
			t.Fatal("members did not meet")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// b dialed a to join (push-pull): a stream only b counts.
	if tb := b.Traffic(); tb.StreamBytes == 0 {
		t.Fatalf("b joined over a stream it dialed, yet counts %+v", tb)
	}
	before := a.Traffic()
	msg := make([]byte, 5000)
	rand.Read(msg) // incompressible: memberlist compresses user messages
	if err := a.Send(a.Member("b"), msg, true); err != nil {
		t.Fatal(err)
	}
	if grew := a.Traffic().StreamBytes - before.StreamBytes; grew < int64(len(msg)) {
		t.Fatalf("a sent %d bytes over a stream, its stream count grew by %d", len(msg), grew)
	}
	time.Sleep(500 * time.Millisecond) // a few probe rounds
	if a.Traffic().PacketBytes == 0 || b.Traffic().PacketBytes == 0 {
		t.Fatalf("probes sent no counted packets: a %+v, b %+v", a.Traffic(), b.Traffic())
	}
}

// TestPartitionMarksDownAndHealRejoins runs two real members on loopback.
func TestPartitionMarksDownAndHealRejoins(t *testing.T) {
	f := NewFaults(2)
	a, err := Start(Config{Name: "a", Bind: "127.0.0.1:0", Fast: fast, Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown()
	b, err := Start(Config{Name: "b", Bind: "127.0.0.1:0", Fast: fast, Faults: f, Bootstrap: []string{a.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	state := func(g *Gossip) string {
		for _, s := range g.States() {
			return s.State
		}
		return "none"
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		// Production SWIM suspects after 4 × log10(n) probe intervals of
		// 1s (memberlist.DefaultLANConfig), so "down" takes seconds.
		deadline := time.Now().Add(timers(10*time.Second, 60*time.Second))
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (a sees %s, b sees %s)", what, state(a), state(b))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("join", func() bool { return state(a) == "up" && state(b) == "up" })
	f.Partition([]string{a.Addr()}, []string{b.Addr()})
	wait("down on both sides", func() bool { return state(a) == "down" && state(b) == "down" })
	// Stay partitioned past GossipToTheDeadTime so SWIM alone would never
	// reconnect the two; Reconnect (run by the store's rejoin loop) must.
	time.Sleep(timers(2500*time.Millisecond, memberlist.DefaultLANConfig().GossipToTheDeadTime+500*time.Millisecond))
	f.Heal()
	time.Sleep(500 * time.Millisecond)
	if state(a) != "down" {
		t.Fatalf("SWIM reconnected on its own; the test no longer proves Reconnect is needed")
	}
	if n := b.Reconnect(nil); n != 1 {
		t.Fatalf("Reconnect reached %d members, want 1", n)
	}
	// As the store's rejoin loop does, Reconnect again until both sides
	// are up: the first push-pull can carry a's state from before a
	// refuted b's "dead" claim, and past GossipToTheDeadTime a's
	// refutation reaches b only through the next one.
	last := time.Now()
	wait("rejoin", func() bool {
		if time.Since(last) > timers(500*time.Millisecond, 5*time.Second) {
			b.Reconnect(nil)
			last = time.Now()
		}
		return state(a) == "up" && state(b) == "up"
	})
}
