package main

import (
	"encoding/json"
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
		c, _, _ := fc.cmd()
		if err := deleteMirror(c, fc.session(), fc.copies("db"), on); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--on %s: %v, want %q", on, err, want)
		}
	}
	if _, ok, _ := fc.st.LastVolumeRun("lab", "db", "delete-mirror"); ok || fc.ms["m2"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("a refusal opened a run or changed the Mirror")
	}
	delete(fc.ms["m2"].ctrs, leftover)
	fc.ms["m1"].calls = nil
	c, out, errw := fc.cmd()
	g.json = true
	defer func() { g.json = false }()
	if err := deleteMirror(c, fc.session(), fc.copies("db"), "m2"); err != nil {
		t.Fatalf("delete-mirror: %v\n%s", err, errw)
	}
	if _, ok := fc.ms["m2"].vols["db"]; ok {
		t.Fatal("m2 still holds db")
	}
	var rec struct{ Run operator.VolumeRun }
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.Run.Kind != "delete-mirror" || rec.Run.State != operator.RunDone ||
		stepsOf(rec.Run) != "check-mirror/done@m2 forget-mirror/done@m2 remove/done@m2" {
		t.Fatalf("--json: %s (%v)", out, err)
	}
	if slices.Contains(fc.ms["m1"].calls, "set_volume_copy") || fc.ms["m1"].vols["db"].copy.Floor != 1 {
		t.Fatalf("the Writer was touched: %v", fc.ms["m1"].calls)
	}
}

// TestRestorePromotes: a Writer that answers is never replaced; one that
// does not answer needs --force; then the Mirror becomes the Writer.
func TestRestorePromotes(t *testing.T) {
	fc := newFakeCluster(t, "m2", "m1", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m3", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	c, _, _ := fc.cmd()
	if err := restoreVolume(c, fc.session(), fc.copies("db"), "m2", true); err == nil || !strings.Contains(err.Error(), "m1 answers as the Writer of db") {
		t.Fatalf("Writer answers: %v", err)
	}
	fc.down("m1")
	cp := fc.copies("db")
	if err := restoreVolume(c, fc.session(), cp, "m2", false); err == nil || !strings.Contains(err.Error(), "--force: m1 did not answer and may hold the Writer") {
		t.Fatalf("Writer unreachable, no --force: %v", err)
	}
	if fc.ms["m2"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("a refusal changed m2")
	}
	c, out, errw := fc.cmd()
	if err := restoreVolume(c, fc.session(), cp, "m2", true); err != nil {
		t.Fatalf("restore --force: %v\n%s", err, errw)
	}
	got := fc.ms["m2"].vols["db"].copy
	r, _, _ := fc.st.LastVolumeRun("lab", "db", "restore")
	if got.Role != volumecopy.Writer || got.Epoch == 0 || r.State != operator.RunDone || stepsOf(r) != "check-mirror/done@m2 promote/done@m2" {
		t.Fatalf("m2 %+v, run %s %s", got, r.State, stepsOf(r))
	}
	if !strings.Contains(errw.String(), "writes on the old Writer after m2's last sync are not on it") || !strings.Contains(out.String(), "restore run gen 2 done") {
		t.Fatalf("output:\n%s%s", errw, out)
	}
	if fc.ms["m3"].vols["db"].copy.Role != volumecopy.Mirror {
		t.Fatal("m3's Mirror changed")
	}
	// Again: m2 is the Writer, nothing to do.
	c, out, _ = fc.cmd()
	if err := restoreVolume(c, fc.session(), fc.copies("db"), "m2", false); err != nil || !strings.Contains(out.String(), "nothing to do") {
		t.Fatalf("again: %v %s", err, out)
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
	if _, err := cp.writer(); err == nil || !strings.Contains(err.Error(), "m1 (epoch 5) and m2 (epoch 9)") && !strings.Contains(err.Error(), "m2 (epoch 9) and m1 (epoch 5)") {
		t.Fatalf("two Writers: %v", err)
	}
	c, _, _ := fc.cmd()
	if err := deleteMirror(c, fc.session(), cp, "m3"); err == nil || !strings.Contains(err.Error(), "two Writers") {
		t.Fatalf("delete-mirror with two Writers: %v", err)
	}
	for from, want := range map[string]string{
		"m1": "--from m2, the newer epoch, keeps its Writer and demotes m1",
		"m3": "--from m2, the newer epoch",
		"m2": "running Container shop-production-db-0001 on m1 mounts the older Writer of db: stop it first",
	} {
		if err := restoreVolume(c, fc.session(), cp, from, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--from %s: %v, want %q", from, err, want)
		}
	}
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer {
		t.Fatal("a refusal demoted m1")
	}
	fc.ms["m1"].ctrs[old].state = "exited"
	c, _, errw := fc.cmd()
	if err := restoreVolume(c, fc.session(), cp, "m2", false); err != nil {
		t.Fatalf("demote: %v\n%s", err, errw)
	}
	r, _, _ := fc.st.LastVolumeRun("lab", "db", "restore")
	if fc.ms["m1"].vols["db"].copy.Role != volumecopy.Mirror || fc.ms["m2"].vols["db"].copy.Role != volumecopy.Writer ||
		stepsOf(r) != "check-writer/done@m2 demote-writer/done@m1" {
		t.Fatalf("after: m1 %s m2 %s, steps %s", fc.ms["m1"].vols["db"].copy.Role, fc.ms["m2"].vols["db"].copy.Role, stepsOf(r))
	}
	if !strings.Contains(errw.String(), "its writes since are lost") {
		t.Fatalf("output does not say the writes are lost:\n%s", errw)
	}
}

// TestRunAboveOtherOperatorsFloor: floors raised by another operator
// computer's runs (70 here, this store has numbered none) do not refuse
// this computer's run as a late one: it opens at gen 71.
func TestRunAboveOtherOperatorsFloor(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 70})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 70})
	c, _, errw := fc.cmd()
	if err := deleteMirror(c, fc.session(), fc.copies("db"), "m2"); err != nil {
		t.Fatalf("delete-mirror: %v\n%s", err, errw)
	}
	r, ok, err := fc.st.LastVolumeRun("lab", "db", "delete-mirror")
	if !ok || err != nil || r.Gen != 71 || r.State != operator.RunDone {
		t.Fatalf("run %+v %v %v, want gen 71 done", r, ok, err)
	}
}
