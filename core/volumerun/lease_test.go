package volumerun

import (
	"context"
	"errors"
	"testing"

	"github.com/ployz/ployz/core/volumecopy"
)

type leaseKey struct{}

// TestRunHoldsVolumeLease: a run takes its volume's lease before it
// opens, runs under the lease's context and releases it at the end; a
// refused lease opens no run and runs no step.
func TestRunHoldsVolumeLease(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	rn := fc.runner()
	refused := errors.New("volume:db is held by bo@ci")
	var scope, command string
	rn.Lease = func(ctx context.Context, s, c string) (context.Context, func(), error) {
		scope, command = s, c
		return nil, nil, refused
	}
	ran := false
	res, err := rn.runVolume(context.Background(), fc.copies("db"), "sync", "", func(*volumeRun) error { ran = true; return nil })
	if !errors.Is(err, refused) || ran || res.Run != nil || scope != "volume:db" || command != "volume sync" {
		t.Fatalf("refused lease: %v, ran %v, run %+v, scope %q %q", err, ran, res.Run, scope, command)
	}
	released := false
	rn.Lease = func(ctx context.Context, s, c string) (context.Context, func(), error) {
		return context.WithValue(ctx, leaseKey{}, s), func() { released = true }, nil
	}
	res, err = rn.runVolume(context.Background(), fc.copies("db"), "sync", "", func(r *volumeRun) error {
		if r.ctx.Value(leaseKey{}) != "volume:db" {
			t.Error("the run's steps do not run under the lease's context")
		}
		return nil
	})
	// gen 2, the first above the copies' floor: the refused attempt opened none.
	if err != nil || res.Run == nil || res.Run.Gen != 2 || !released {
		t.Fatalf("leased run: %+v, %v, released %v", res.Run, err, released)
	}
}
