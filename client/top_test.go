package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
)

// TestWatchTopSamplesEachTick: the live view's loop hands over a sample
// at once and one per tick with what the Cluster answers then (a Machine
// that stops answering is named, one that hangs is cut off by the fetch
// timeout and the loop goes on), and returns when its context ends.
func TestWatchTopSamplesEachTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ticks := make(chan time.Time)
	frames := make(chan TopSample, 1)
	clock := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	fetches := 0
	l := topWatch{timeout: 50 * time.Millisecond,
		now:  func() time.Time { return clock },
		emit: func(s TopSample) { frames <- s },
		fetch: func(ctx context.Context) ([]observe.TopRow, []observe.Failure, error) {
			fetches++
			cpu := float64(fetches) / 10
			rows := []observe.TopRow{{Machine: "m1", Container: "burn-1", Service: "burn", CPU: &cpu}}
			switch fetches {
			case 2:
				return rows, []observe.Failure{{Machine: "m2", Error: "unreachable"}}, nil
			case 3:
				<-ctx.Done() // a Machine that hangs
				return nil, nil, ctx.Err()
			}
			return rows, nil, nil
		}}
	done := make(chan struct{})
	go func() { l.run(ctx, ticks); close(done) }()
	cpu := func(s TopSample) float64 {
		if len(s.Rows) != 1 {
			return -1
		}
		return *s.Rows[0].CPU
	}
	want := []func(TopSample) bool{
		func(s TopSample) bool {
			return s.At.Format("15:04:05") == "07:00:00" && cpu(s) == 0.1 && s.Failed == nil && s.Err == nil
		},
		func(s TopSample) bool {
			return s.At.Format("15:04:05") == "07:00:10" && cpu(s) == 0.2 && len(s.Failed) == 1 && s.Failed[0].Machine == "m2"
		},
		func(s TopSample) bool { return errors.Is(s.Err, context.DeadlineExceeded) },
		func(s TopSample) bool { return cpu(s) == 0.4 && s.Err == nil },
	}
	for i, ok := range want {
		if i > 0 {
			clock = clock.Add(10 * time.Second)
			ticks <- clock
		}
		select {
		case f := <-frames:
			if !ok(f) {
				t.Fatalf("sample %d: %+v", i+1, f)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no sample %d", i+1)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
	if fetches != 4 {
		t.Fatalf("%d fetches for 4 samples", fetches)
	}
}

// TestTopNamesMachinesWithoutMetrics: Machines that do not serve metrics
// (the fake Cluster's) are named as failures, with a *PartialError
// beside the rows; WatchTop hands over the same at once.
func TestTopNamesMachinesWithoutMetrics(t *testing.T) {
	_, s := newFake(t, "m1", "m2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rows, failed, err := s.Top(ctx, rpc.Target{All: true})
	if !IsPartial(err) || len(rows) != 0 || len(failed) != 2 || failed[0].Machine == failed[1].Machine {
		t.Fatalf("top: rows %v, failed %+v, %v", rows, failed, err)
	}
	s.WatchTop(ctx, rpc.Target{All: true}, nil, time.Second, func(ts TopSample) {
		if len(ts.Failed) != 2 || ts.Err != nil || ts.At.IsZero() {
			t.Errorf("sample %+v", ts)
		}
		cancel()
	})
}
