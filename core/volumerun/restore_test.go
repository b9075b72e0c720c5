package volumerun

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/volumecopy"
)

// stepsOf is a run's steps as name/outcome@machine.
func stepsOf(r operator.VolumeRun) string {
	var out []string
	for _, st := range r.Steps {
		out = append(out, st.Name+"/"+st.Outcome+"@"+st.Machine)
	}
	return strings.Join(out, " ")
}

// TestDeleteMirror: refused, changing nothing, for the Writer, a copy
// with no role and a Mirror a Container mounts; else the Mirror becomes
// none and its dataset goes, and the Writer is not touched.
func TestDeleteMirror(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m3", "db", volumecopy.Copy{Floor: 1})
	leftover := fc.container("m2", "shop-production-db-0001", "db", "exited")
	for on, want := range map[string]string{
		"m1": "--on: m1 holds the Writer of db (epoch 5), not a Mirror",
		"m3": "--on: m3's copy of db is none, not a Mirror",
		"m2": "--on: Container shop-production-db-0001 on m2 mounts db: remove it first",
		"m9": "--on: no Machine \"m9\" answered",
	} {
		if _, err := fc.runner().DeleteMirror(context.Background(), "db", on); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--on %s: %v, want %q", on, err, want)
		}
	}
	if _, ok, _ := fc.runner().LastRun(context.Background(), "db", "delete-mirror"); ok || fc.ms["m2"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("a refusal opened a run or changed the Mirror")
	}
	delete(fc.ms["m2"].Ctrs, leftover)
	fc.ms["m1"].Calls = nil
	res, err := fc.runner().DeleteMirror(context.Background(), "db", "m2")
	if err != nil {
		t.Fatalf("delete-mirror: %v\n%s", err, &fc.events)
	}
	if _, ok := fc.ms["m2"].vols["db"]; ok {
		t.Fatal("m2 still holds db")
	}
	if r := res.Run; r == nil || r.Kind != "delete-mirror" || r.State != operator.RunDone ||
		stepsOf(*r) != "check-mirror/done@m2 forget-mirror/done@m2 remove/done@m2" {
		t.Fatalf("run: %+v", r)
	}
	if saved, _, _ := fc.runner().LastRun(context.Background(), "db", "delete-mirror"); stepsOf(saved) != stepsOf(*res.Run) || saved.State != operator.RunDone {
		t.Fatalf("the store recorded %+v", saved)
	}
	if slices.Contains(fc.ms["m1"].Calls, "set_volume_copy") || fc.ms["m1"].vols["db"].copy.Floor != 1 {
		t.Fatalf("the Writer was touched: %v", fc.ms["m1"].Calls)
	}
}

// TestRestorePromotes: a Writer that answers is never replaced; one that
// does not answer needs --force; then the Mirror becomes the Writer.
func TestRestorePromotes(t *testing.T) {
	fc := newFakeCluster(t, "m2", "m1", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m3", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	ctx, rn := context.Background(), fc.runner()
	if _, err := rn.Restore(ctx, "db", "m2", true); err == nil || !strings.Contains(err.Error(), "m1 answers as the Writer of db") {
		t.Fatalf("Writer answers: %v", err)
	}
	fc.down("m1")
	if _, err := rn.Restore(ctx, "db", "m2", false); err == nil || !strings.Contains(err.Error(), "--force: m1 did not answer and may hold the Writer") {
		t.Fatalf("Writer unreachable, no --force: %v", err)
	}
	if fc.ms["m2"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("a refusal changed m2")
	}
	res, err := rn.Restore(ctx, "db", "m2", true)
	if err != nil {
		t.Fatalf("restore --force: %v\n%s", err, &fc.events)
	}
	got := fc.ms["m2"].vols["db"].copy
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "restore")
	if got.Role != volumecopy.Writer || got.Epoch == 0 || r.State != operator.RunDone || stepsOf(r) != "check-mirror/done@m2 promote/done@m2" {
		t.Fatalf("m2 %+v, run %s %s", got, r.State, stepsOf(r))
	}
	if !fc.reported(EventNote, "m2", "m2 is the Writer of db: writes on the old Writer after m2's last sync are not on it") || res.Run == nil || res.Run.Gen != 2 {
		t.Fatalf("result %+v, events:\n%s", res, &fc.events)
	}
	if fc.ms["m3"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("m3's Mirror changed")
	}
	// Again: m2 is the Writer, nothing to do.
	if res, err := rn.Restore(ctx, "db", "m2", false); err != nil || res.Nothing == nil || !strings.Contains(res.Nothing.Message, "nothing to do") {
		t.Fatalf("again: %+v %v", res, err)
	}
}

// TestRestoreDemotesOlderWriter: two Writers refuse every run, naming
// both epochs; restore --from the newer demotes the older once its
// Container is stopped, saying its writes are lost.
func TestRestoreDemotesOlderWriter(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 9, Floor: 1})
	fc.volume("m3", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	old := fc.container("m1", "shop-production-db-0001", "db", "running")
	cp := fc.copies("db")
	if _, err := cp.Writer(); err == nil || !strings.Contains(err.Error(), "m1 (epoch 5) and m2 (epoch 9)") && !strings.Contains(err.Error(), "m2 (epoch 9) and m1 (epoch 5)") {
		t.Fatalf("two Writers: %v", err)
	}
	ctx, rn := context.Background(), fc.runner()
	if _, err := rn.DeleteMirror(ctx, "db", "m3"); err == nil || !strings.Contains(err.Error(), "two Writers") {
		t.Fatalf("delete-mirror with two Writers: %v", err)
	}
	for from, want := range map[string]string{
		"m1": "--from m2, the newer epoch, keeps its Writer and demotes m1",
		"m3": "--from m2, the newer epoch",
		"m2": "running Container shop-production-db-0001 on m1 mounts the older Writer of db: stop it first",
	} {
		if _, err := rn.Restore(ctx, "db", from, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--from %s: %v, want %q", from, err, want)
		}
	}
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer {
		t.Fatal("a refusal demoted m1")
	}
	fc.ms["m1"].Ctrs[old].State = "exited"
	if _, err := rn.Restore(ctx, "db", "m2", false); err != nil {
		t.Fatalf("demote: %v\n%s", err, &fc.events)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "restore")
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Mirror || fc.ms["m2"].vols["db"].copy.Role != volumecopy.Writer ||
		stepsOf(r) != "check-writer/done@m2 demote-writer/done@m1" {
		t.Fatalf("after: m1 %s m2 %s, steps %s", fc.ms["m1"].vols["db"].copy.Role, fc.ms["m2"].vols["db"].copy.Role, stepsOf(r))
	}
	if !strings.Contains(fc.events.String(), "its writes since are lost") {
		t.Fatalf("events do not say the writes are lost:\n%s", &fc.events)
	}
}

// TestRunAboveOtherOperatorsFloor: floors raised by another operator
// computer's runs (70 here, this store has numbered none) do not refuse
// this computer's run as a late one: it opens at gen 71.
func TestRunAboveOtherOperatorsFloor(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 70})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 70})
	if _, err := fc.runner().DeleteMirror(context.Background(), "db", "m2"); err != nil {
		t.Fatalf("delete-mirror: %v\n%s", err, &fc.events)
	}
	r, ok, err := fc.runner().LastRun(context.Background(), "db", "delete-mirror")
	if !ok || err != nil || r.Gen != 71 || r.State != operator.RunDone {
		t.Fatalf("run %+v %v %v, want gen 71 done", r, ok, err)
	}
}
