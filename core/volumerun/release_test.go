package volumerun

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/volumecopy"
)

// releaseCluster is m1 the Writer of db with a running Container, and
// Mirrors on the others, every copy holding run-0.
func releaseCluster(t *testing.T, mirrors ...string) (*fakeCluster, string) {
	fc := newFakeCluster(t, append([]string{"m1"}, mirrors...)...)
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5})
	fc.snaps("m1", "db", "run-0")
	for _, m := range mirrors {
		fc.volume(m, "db", volumecopy.Copy{Role: volumecopy.Mirror})
		fc.snaps(m, "db", "run-0")
	}
	return fc, fc.container("m1", "shop-production-db-0001", "db", "running")
}

// runRelease releases db, answering its result and the events it
// reported.
func runRelease(fc *fakeCluster, o ReleaseOptions) (Result, string, error) {
	fc.events.reset()
	res, err := fc.runner().Release(context.Background(), "db", o)
	return res, fc.events.String(), err
}

// TestRelease: the bulk send while the Container runs, then the cut
// (stop, final snapshot, final send), then the demote; every copy ends a
// Mirror holding the final snapshot, the Container stopped.
func TestRelease(t *testing.T) {
	fc, id := releaseCluster(t, "m2", "m3")
	res, errw, err := runRelease(fc, ReleaseOptions{Grace: time.Second})
	if err != nil {
		t.Fatalf("release: %v\n%s", err, errw)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "release")
	want := "check-writer/done@m1 check-mirror/done@m2 check-mirror/done@m3 snapshot/done@m1 send/done@m2 send/done@m3 " +
		"stop/done@m1 snapshot-cut/done@m1 send/done@m2 send/done@m3 demote-writer/done@m1"
	if got := stepsOf(r); got != want || r.State != operator.RunDone || r.Source != "m1" {
		t.Fatalf("run %s %s, steps\n%s\nwant\n%s", r.State, r.Source, got, want)
	}
	for _, m := range []string{"m1", "m2", "m3"} {
		v := fc.ms[m].vols["db"]
		if v.copy.Role != volumecopy.Mirror || v.snaps[len(v.snaps)-1] != "run-1-cut" {
			t.Errorf("%s: %s holding %v, want a Mirror at run-1-cut", m, v.copy.Role, v.snaps)
		}
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "exited" {
		t.Errorf("Container %s, want it stopped", st)
	}
	for _, s := range []string{"stay stopped", "ployz volume restore db --from MACHINE", "point of no return"} {
		if !strings.Contains(errw, s) {
			t.Errorf("output lacks %q:\n%s", s, errw)
		}
	}
	if res.Run == nil || res.Run.Gen != 1 || res.Run.State != operator.RunDone {
		t.Errorf("result: %+v", res)
	}

	// Again: the Writer is already demoted, nothing to do, no run.
	res, _, err = runRelease(fc, ReleaseOptions{})
	if err != nil || res.Run != nil || res.Nothing == nil || res.Nothing.Writer != "m1" || !strings.Contains(res.Nothing.Message, "nothing to do") {
		t.Fatalf("again: %+v %v", res, err)
	}
	if r, _, _ := fc.runner().LastRun(context.Background(), "db", "release"); r.Gen != 1 {
		t.Fatalf("nothing to do opened run %d", r.Gen)
	}
}

// TestReleaseUndo: a final send that fails is undone: the Container runs
// again and m1 is still the Writer; the run ends undone. Running it again
// finishes from what the disks show.
func TestReleaseUndo(t *testing.T) {
	fc, id := releaseCluster(t, "m2")
	fc.fastAsks()
	fc.serveTasks("m1", 50*time.Millisecond)         // the stop and the undo's start are volume tasks
	fc.failSend = map[string]bool{"run-1-cut": true} // a cut stream that leaves no token
	fc.waits.token = 100 * time.Millisecond
	_, errw, err := runRelease(fc, ReleaseOptions{})
	if err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("release: %v", err)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "release")
	want := "check-writer/done@m1 check-mirror/done@m2 snapshot/done@m1 send/done@m2 stop/done@m1 snapshot-cut/done@m1 send/failed@m2 undo-start/done@m1"
	if got := stepsOf(r); got != want || r.State != operator.RunUndone {
		t.Fatalf("run %s, steps\n%s\nwant\n%s", r.State, got, want)
	}
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer || fc.ms["m1"].Ctrs[id].State != "running" {
		t.Fatalf("m1 %s, Container %s: want the Writer, running", fc.ms["m1"].vols["db"].copy.Role, fc.ms["m1"].Ctrs[id].State)
	}
	if !strings.Contains(errw, "undone: m1 is still the Writer") || !strings.Contains(errw, "m1: docker stop shop-production-db-0001 (done") {
		t.Errorf("output:\n%s", errw)
	}
	for _, kind := range []string{"stop", "start"} {
		if task, plain := fc.dockerCalls("m1", kind); task != 1 || plain != 0 {
			t.Fatalf("docker %s: %d through the task, %d plain; want 1 and 0", kind, task, plain)
		}
	}

	fc.failSend = nil
	if _, errw, err := runRelease(fc, ReleaseOptions{}); err != nil {
		t.Fatalf("again: %v\n%s", err, errw)
	}
	if r, _, _ := fc.runner().LastRun(context.Background(), "db", "release"); r.Gen != 2 || r.State != operator.RunDone || fc.ms["m1"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatalf("again: run %d %s, m1 %s", r.Gen, r.State, fc.ms["m1"].vols["db"].copy.Role)
	}
}

// TestReleaseNoMirror: the only copy is released with --force only.
func TestReleaseNoMirror(t *testing.T) {
	fc, id := releaseCluster(t)
	_, _, err := runRelease(fc, ReleaseOptions{})
	if err == nil || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "no second copy") {
		t.Fatalf("no --force: %v", err)
	}
	if _, ok, _ := fc.runner().LastRun(context.Background(), "db", "release"); ok || fc.ms["m1"].Ctrs[id].State != "running" {
		t.Fatal("a refusal opened a run or stopped the Container")
	}
	if _, errw, err := runRelease(fc, ReleaseOptions{Force: true}); err != nil {
		t.Fatalf("--force: %v\n%s", err, errw)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "release")
	want := "check-writer/done@m1 snapshot/done@m1 stop/done@m1 snapshot-cut/done@m1 demote-writer/done@m1"
	if got := stepsOf(r); got != want {
		t.Fatalf("steps\n%s\nwant\n%s", got, want)
	}
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Mirror || fc.ms["m1"].Ctrs[id].State != "exited" {
		t.Fatal("--force: want m1 a Mirror and its Container stopped")
	}
}

// TestReleaseRefusals change nothing: no Writer (never released here),
// two Writers, a Machine that does not answer.
func TestReleaseRefusals(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	if _, _, err := runRelease(fc, ReleaseOptions{}); err == nil || !strings.Contains(err.Error(), "has no Writer") {
		t.Fatalf("no Writer: %v", err)
	}
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 2})
	if _, _, err := runRelease(fc, ReleaseOptions{}); err == nil || !strings.Contains(err.Error(), "two Writers") {
		t.Fatalf("two Writers: %v", err)
	}
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	fc.down("m3")
	if _, _, err := runRelease(fc, ReleaseOptions{}); err == nil || !strings.Contains(err.Error(), "m3 did not answer") {
		t.Fatalf("m3 down: %v", err)
	}
	if _, ok, _ := fc.runner().LastRun(context.Background(), "db", "release"); ok {
		t.Fatal("a refusal opened a run")
	}
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer {
		t.Fatal("a refusal changed m1's copy")
	}
}
