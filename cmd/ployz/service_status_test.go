package main

import (
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

func TestServiceRowBelowReplicas(t *testing.T) {
	r := serviceRow{Desired: "2", Ready: 1, NotReadyOn: []string{"m2", "m1", "m2"}}
	r.judge()
	if !r.Below || r.note() != "below replicas; not ready on m1, m2" {
		t.Fatalf("one of two ready: below=%t note=%q", r.Below, r.note())
	}
	for _, ok := range []serviceRow{{Desired: "2", Ready: 2}, {Desired: "global", Ready: 0}, {Desired: "-", Ready: 0}} {
		ok.judge()
		if ok.Below || ok.note() != "" {
			t.Errorf("%+v reported below its replicas", ok)
		}
	}
}

func TestLastExit(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		co   rpc.ContainerObservation
		want string
	}{
		{rpc.ContainerObservation{}, "-"},
		{rpc.ContainerObservation{ExitCode: 137, OOMKilled: true, FinishedAt: "2026-12-01T09:58:00Z"}, "137 OOM-killed (2 minutes ago)"},
		{rpc.ContainerObservation{ExitCode: 2, FinishedAt: "2026-12-01T09:59:30Z"}, "2 (30 seconds ago)"},
	}
	for _, c := range cases {
		if got := lastExit(c.co, now); got != c.want {
			t.Errorf("lastExit(%+v) = %q, want %q", c.co, got, c.want)
		}
	}
}
