package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/leasehold"
)

const shopScope = "namespace:shop-production"

// shortLeases shortens lease timing for a test.
func shortLeases(t *testing.T, ttl, poll time.Duration) {
	oldTTL, oldPoll := leasehold.TTL, leasehold.Poll
	leasehold.TTL, leasehold.Poll = ttl, poll
	t.Cleanup(func() { leasehold.TTL, leasehold.Poll = oldTTL, oldPoll })
}

// TestDeployRefusedWhileLeased: another operator's lease on the namespace
// refuses a Deploy naming the holder, before anything runs; once free,
// the Deploy runs and releases its own lease.
func TestDeployRefusedWhileLeased(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	fc.HoldLease(shopScope, "bo@ci", "scale web", time.Minute)
	_, err := s.Deploy(context.Background(), DeployRequest{Compose: []byte(shopCompose), File: "compose.yaml"}, Hooks{})
	var held *LeaseHeldError
	if !errors.As(err, &held) || held.Holder.Name != "bo@ci" || held.Command != "scale web" || held.Scope != shopScope ||
		time.Since(held.Since) > time.Minute || !strings.Contains(err.Error(), "bo@ci") || !strings.Contains(err.Error(), "since") {
		t.Fatalf("deploy under bo's lease: %v", err)
	}
	if got := fc.Running(); len(got) != 0 {
		t.Fatalf("a refused deploy ran Containers: %v", got)
	}
	if saved, _ := s.LatestSaved(context.Background()); len(saved) != 0 {
		t.Fatalf("a refused deploy saved a revision: %+v", saved)
	}
	fc.HoldLease(shopScope, "bo@ci", "scale web", -time.Second) // bo's process died: expired
	deployShop(t, s)
	if l, ok := fc.Lease(shopScope); ok {
		t.Fatalf("the deploy left its lease: %+v", l)
	}
}

// TestLeaseWaitUntilFree: with wait set, a held namespace is waited for
// (Waiting hears each refusal) and the command runs once it is free; a
// context ending first ends the wait.
func TestLeaseWaitUntilFree(t *testing.T) {
	shortLeases(t, time.Minute, 20*time.Millisecond)
	fc, s := newFake(t, "m1", "m2")
	var heard atomic.Int32
	s.SetLeaseWait(LeaseWait{Wait: true, Waiting: func(e *LeaseHeldError) {
		if e.Holder.Name == "bo@ci" {
			heard.Add(1)
		}
	}})
	// Long enough that a loaded host still reaches the deploy's first
	// attempt while bo@ci holds it.
	const hold = 800 * time.Millisecond
	start := time.Now()
	fc.HoldLease(shopScope, "bo@ci", "deploy", hold)
	deployShop(t, s)
	if heard.Load() == 0 || time.Since(start) < hold-50*time.Millisecond {
		t.Fatalf("waited %s hearing %d refusals", time.Since(start), heard.Load())
	}
	fc.HoldLease(shopScope, "bo@ci", "deploy", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := s.Lease(ctx, shopScope, "deploy", true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cancelled wait: %v", err)
	}
}

// TestLeaseRenewedThenLost: a held lease is renewed in the background;
// when another takes it over (a partition's merge), the holder's context
// ends and the loss is heard, so the command stops before its next step.
func TestLeaseRenewedThenLost(t *testing.T) {
	shortLeases(t, 300*time.Millisecond, 20*time.Millisecond)
	fc, s := newFake(t, "m1")
	var lost atomic.Value
	ctx, release, err := s.Hold(context.Background(), "volume:db", "volume move", func(err error) { lost.Store(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for deadline := time.Now().Add(5 * time.Second); fc.Renewals() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease was never renewed")
		}
	}
	if l, ok := fc.Lease("volume:db"); !ok || l.Holder.Name != s.Operator().Name {
		t.Fatalf("renewed lease %+v, %v", l, ok)
	}
	fc.TakeLease("volume:db", "bo@ci")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder went on after losing its lease")
	}
	if err, _ := lost.Load().(error); err == nil || !strings.Contains(err.Error(), "bo@ci") || !strings.Contains(context.Cause(ctx).Error(), "lost") {
		t.Fatalf("loss heard as %v, cause %v", err, context.Cause(ctx))
	}
	release()
	if l, ok := fc.Lease("volume:db"); !ok || l.Holder.Name != "bo@ci" {
		t.Fatalf("the loser's release freed the winner's lease: %+v %v", l, ok)
	}
}

// TestLeaseBadScope refuses a malformed scope naming the field.
func TestLeaseBadScope(t *testing.T) {
	_, s := newFake(t, "m1")
	for _, scope := range []string{"", "project:x", "namespace:"} {
		if _, err := s.Lease(context.Background(), scope, "deploy", false); err == nil || !strings.Contains(err.Error(), "scope") {
			t.Errorf("scope %q: %v", scope, err)
		}
	}
}

// TestDrainAndEnrollHoldLeases: a drain's redeploy of a leased namespace
// fails naming the holder (and the drain is partial); an enrollment
// while another holds "enroll" is refused before it dials the Machine.
func TestDrainAndEnrollHoldLeases(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	deployShop(t, s)
	fc.HoldLease(shopScope, "bo@ci", "restart web", time.Minute)
	rep, err := s.Drain(context.Background(), Drain{Machine: "m2"})
	if !IsPartial(err) || len(rep.Namespaces) != 1 || !strings.Contains(rep.Namespaces[0].Error, "held by bo@ci") {
		t.Fatalf("drain under bo's lease: %+v, %v", rep, err)
	}
	fc.HoldLease(EnrollScope, "bo@ci", "machine add m3", time.Minute)
	_, err = s.AddMachine(context.Background(), Enrollment{Dest: "unix:///nonexistent/m3.sock"})
	var held *LeaseHeldError
	if !errors.As(err, &held) || held.Holder.Name != "bo@ci" || held.Scope != EnrollScope {
		t.Fatalf("add under bo's enroll lease: %v", err)
	}
}
