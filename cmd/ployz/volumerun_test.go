package main

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func snaps(pairs ...string) []rpc.VolumeSnapshot {
	var out []rpc.VolumeSnapshot
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, rpc.VolumeSnapshot{Name: pairs[i], GUID: pairs[i+1]})
	}
	return out
}

// TestCommonBase: the newest Writer snapshot the target holds, by GUID
// (names may differ), or none.
func TestCommonBase(t *testing.T) {
	w := rpc.Volume{Snapshots: snaps("s1", "g1", "run-1", "g2", "run-2", "g3")}
	for _, c := range []struct {
		t    []rpc.VolumeSnapshot
		want string
	}{
		{snaps("run-1", "g2"), "run-1"},
		{snaps("x", "g1", "run-1", "g2"), "run-1"},
		{snaps("renamed", "g1"), "s1"},
		{snaps("run-1", "other"), ""},
		{nil, ""},
		{snaps("", ""), ""},
	} {
		if got := commonBase(w, rpc.Volume{Snapshots: c.t}); got != c.want {
			t.Errorf("target %v: base %q, want %q", c.t, got, c.want)
		}
	}
}

// TestMirrorTarget refuses a bad --to before a run opens, naming --to.
func TestMirrorTarget(t *testing.T) {
	role := func(r string) rpc.Volume { return rpc.Volume{Name: "db", Copy: &rpc.VolumeCopy{Role: r}} }
	cp := copies{name: "db", writers: []string{"m1"},
		vols:    map[string]rpc.Volume{"m1": role("writer"), "m3": role("mirror"), "m4": role("none")},
		pools:   map[string]bool{"m1": true, "m2": true, "m3": true, "m4": true, "m5": false},
		missing: []string{"m6"}}
	for to, want := range map[string]string{
		"m1": "holds the Writer", "m3": "already holds db as its mirror", "m5": "has no ZFS pool",
		"m6": "did not answer", "m9": "no Machine \"m9\"", "m2": "", "m4": "",
	} {
		got, err := mirrorTarget(cp, "m1", to)
		if want == "" {
			if err != nil || got != to {
				t.Errorf("--to %s: %q, %v", to, got, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--to: ") {
			t.Errorf("--to %s: %v, want a refusal naming --to: %q", to, err, want)
		}
	}
	// No Writer, or two: no run.
	if _, err := (copies{name: "db", vols: map[string]rpc.Volume{"m1": role("none")}}).writer(); err == nil || !strings.Contains(err.Error(), "has no Writer") {
		t.Errorf("no writer: %v", err)
	}
	if _, err := (copies{name: "db", writers: []string{"m1", "m2"}}).writer(); err == nil || !strings.Contains(err.Error(), "two Writers") {
		t.Errorf("two writers: %v", err)
	}
}
