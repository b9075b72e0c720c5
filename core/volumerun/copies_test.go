package volumerun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/core/volumes"
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

// TestCommonBaseBookmark: a Mirror behind the Writer's two run snapshots
// still has a base, the Writer's bookmark of the snapshot it holds; a
// snapshot both hold wins over any bookmark.
func TestCommonBaseBookmark(t *testing.T) {
	w := rpc.Volume{Snapshots: snaps("run-4", "g4", "run-5", "g5"),
		Bookmarks: []rpc.VolumeBookmark{{Name: "run-2", GUID: "g2"}, {Name: "run-3", GUID: "g3"}}}
	for _, c := range []struct {
		t    []rpc.VolumeSnapshot
		want string
	}{
		{snaps("run-2", "g2", "run-3", "g3"), "run-3"},
		{snaps("run-1", "g1", "run-2", "g2"), "run-2"},
		{snaps("run-3", "g3", "run-4", "g4"), "run-4"},
		{snaps("run-1", "g1"), ""},
	} {
		if got := commonBase(w, rpc.Volume{Snapshots: c.t}); got != c.want {
			t.Errorf("target %v: base %q, want %q", c.t, got, c.want)
		}
	}
}

// TestVolumeTarget refuses a bad --to before a run opens, naming --to.
func TestVolumeTarget(t *testing.T) {
	role := func(r string) rpc.Volume { return rpc.Volume{Name: "db", Copy: &rpc.VolumeCopy{Role: r}} }
	cp := Copies{Name: "db", Writers: []string{"m1"},
		Vols:    map[string]rpc.Volume{"m1": role("writer"), "m3": role("mirror"), "m4": role("none")},
		Pools:   map[string]bool{"m1": true, "m2": true, "m3": true, "m4": true, "m5": false},
		Missing: []string{"m6"}}
	for to, want := range map[string]string{
		"m1": "holds the Writer", "m3": "already holds db as its mirror", "m5": "has no ZFS pool",
		"m6": "did not answer", "m9": "no Machine \"m9\"", "m2": "", "m4": "",
	} {
		got, err := cp.target("m1", to, volumecopy.None)
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
	// A Move may go to a Mirror, never to the Writer.
	if got, err := cp.target("m1", "m3", volumecopy.None, volumecopy.Mirror); err != nil || got != "m3" {
		t.Errorf("move to the Mirror: %q, %v", got, err)
	}
	if _, err := cp.target("m1", "m1", volumecopy.None, volumecopy.Mirror); err == nil || !strings.Contains(err.Error(), "holds the Writer") {
		t.Errorf("move to the Writer: %v", err)
	}
	// No Writer, or two: no run.
	if _, err := (Copies{Name: "db", Vols: map[string]rpc.Volume{"m1": role("none")}}).Writer(); err == nil || !strings.Contains(err.Error(), "has no Writer") {
		t.Errorf("no writer: %v", err)
	}
	if _, err := (Copies{Name: "db", Writers: []string{"m1", "m2"}}).Writer(); err == nil || !strings.Contains(err.Error(), "two Writers") {
		t.Errorf("two writers: %v", err)
	}
}

// TestMoveHelpers: a Move finds the Containers bind-mounting the volume
// (and only that volume), and names each new Container by a creation key
// that a replay within the run repeats and another run does not.
func TestMoveHelpers(t *testing.T) {
	bind := func(src string) *rpc.ContainerSpec {
		return &rpc.ContainerSpec{Mounts: []rpc.MountSpec{{Type: "bind", Source: src, Target: "/data"}}}
	}
	for src, want := range map[string]bool{
		"/var/lib/ployz/volumes/db": true, "/var/lib/ployz/volumes/db/sub": true,
		"/var/lib/ployz/volumes/dbx": false, "/srv/db": false,
	} {
		if got := MountsVolume(bind(src), "db"); got != want {
			t.Errorf("MountsVolume(%s) = %v", src, got)
		}
	}
	if MountsVolume(nil, "db") || MountsVolume(&rpc.ContainerSpec{Mounts: []rpc.MountSpec{{Type: "volume", Source: "db", Target: "/d"}}}, "db") {
		t.Error("a Container without spec, or with a Docker volume, counted")
	}
	spec := rpc.ContainerSpec{Namespace: "shop-production", Service: "db"}
	a, b := creationKey(spec, "db", 3, "c1"), creationKey(spec, "db", 3, "c1")
	if a != b || !strings.HasPrefix(a, "shop-production-db-") || len(a) != len("shop-production-db-")+4 {
		t.Fatalf("creation keys %q, %q", a, b)
	}
	if creationKey(spec, "db", 4, "c1") == a || creationKey(spec, "db", 3, "c2") == a {
		t.Error("another run or Container got the same creation key")
	}
}

// TestResumeAfterWaitsForToken: after a cut the target's token may come
// a moment after the source's error; resumeAfter waits for it. A
// Machine's refusal is not waited on, and no token keeps the failure.
func TestResumeAfterWaitsForToken(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.waits.token = 5 * time.Second
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.ms["m2"].vols["db"].token, fc.ms["m2"].vols["db"].tokenAfter = "1-abc", 2
	r, err := fc.runner().beginRun(context.Background(), fc.copies("db"), "sync", "")
	if err != nil {
		t.Fatal(err)
	}
	cut := errors.New("connection reset by peer")
	if v, err := r.resumeAfter("m2", cut); err != nil || v.ResumeToken != "1-abc" || !strings.Contains(fc.events.String(), "continuing from m2's resume token") {
		t.Fatalf("a cut with the token coming late: %+v %v", v, err)
	}
	fc.ms["m2"].vols["db"].inspected = 0
	refusal := rpc.Errorf(rpc.CodeFailedPrecond, "volume: destination has been modified")
	start := time.Now()
	if _, err := r.resumeAfter("m2", refusal); err != refusal || time.Since(start) > 2*time.Second {
		t.Fatalf("a refusal: %v after %s, want it at once", err, time.Since(start))
	}
	fc.ms["m2"].vols["db"].token = ""
	r.waits.token = 1500 * time.Millisecond
	if _, err := r.resumeAfter("m2", cut); err != cut {
		t.Fatalf("a cut that left no token: %v", err)
	}
}

// TestUnanswered names each Machine that did not answer, with its error.
func TestUnanswered(t *testing.T) {
	ms := []volumes.MachineVolumes{{Machine: "m1", List: &rpc.VolumeList{}}, {Machine: "m2"}, {Machine: "m3", Error: "down"}}
	if got := Unanswered(ms); got != " (no answer from m2; m3: down)" {
		t.Errorf("Unanswered = %q", got)
	}
	if got := Unanswered(ms[:1]); got != "" {
		t.Errorf("all answered: %q", got)
	}
}
