package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/serving"
)

// TestMoveFinishes: a Move that failed after its point of no return (m2
// promoted, its Container created under the creation key, start failed)
// is finished by running the same move again: the Container is found,
// not made twice, started, the pointer moved and the old one removed.
// A third run has nothing to do and opens no run.
func TestMoveFinishes(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	oldID := fc.container("m1", "shop-production-db-0001", "db", "exited")
	fc.container("m1", "other", "logs", "running") // mounts another volume: stays
	spec := fc.ms["m1"].ctrs[oldID].ex.Spec
	key := creationKey(spec, "db", 1, oldID)
	newID := fc.container("m2", key, "db", "created")
	fc.pointTo("m1", oldID)

	prev, err := fc.st.BeginVolumeRun("lab", "db", "move", "m2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	prev.Steps = []operator.RunStep{{Name: "check-writer", Machine: "m1", Outcome: operator.RunDone},
		{Name: "promote", Machine: "m2", Outcome: operator.RunDone}, {Name: "create", Machine: "m2", Outcome: operator.RunDone},
		{Name: "start", Machine: "m2", Outcome: operator.RunFailed}}
	if err := fc.st.SaveVolumeRun(prev); err != nil {
		t.Fatal(err)
	}

	c, out, errw := fc.cmd()
	if err := moveVolume(c, fc.session(), fc.copies("db"), "m2", moveOpts{grace: time.Second, readyTimeout: time.Minute}); err != nil {
		t.Fatalf("finish: %v\n%s", err, errw)
	}
	if len(fc.ms["m2"].ctrs) != 1 || fc.ms["m2"].ctrs[newID].state != "running" {
		t.Fatalf("m2's Containers: %+v, want %s alone and running", fc.ms["m2"].ctrs, key)
	}
	if _, ok := fc.ms["m1"].ctrs[oldID]; ok || len(fc.ms["m1"].ctrs) != 1 {
		t.Fatalf("m1 kept the old Container or lost the other: %+v", fc.ms["m1"].ctrs)
	}
	p := fc.ptrs[serving.ServiceKey("shop-production", "db")]
	if len(p.Containers) != 1 || p.Containers[0].ID != newID || p.Containers[0].MachineID != "id-m2" {
		t.Fatalf("pointer %+v, want the new Container on m2", p)
	}
	r, _, _ := fc.st.LastVolumeRun("lab", "db", "move")
	if r.Gen != 2 || r.State != operator.RunDone || r.Finishes != 1 || r.Source != "m1" {
		t.Fatalf("run %+v, want gen 2 done finishing gen 1 from m1", r)
	}
	var names []string
	for _, st := range r.Steps {
		names = append(names, st.Name+"/"+st.Outcome)
	}
	want := "check-writer/done check-mirror/done create/skipped start/done wait-ready/done move-pointer/done remove-old/done"
	if strings.Join(names, " ") != want {
		t.Fatalf("steps %v\nwant %s", names, want)
	}
	if !strings.Contains(errw.String(), "finishing move gen 1") || !strings.Contains(out.String(), "move run gen 2 done") {
		t.Fatalf("output:\n%s%s", errw, out)
	}
	// The Writer's floor rose to the run's gen; the Mirror's too.
	if fc.ms["m2"].vols["db"].copy.Floor != 2 || fc.ms["m1"].vols["db"].copy.Floor != 2 {
		t.Fatalf("floors %d %d, want 2", fc.ms["m2"].vols["db"].copy.Floor, fc.ms["m1"].vols["db"].copy.Floor)
	}

	c, out, _ = fc.cmd()
	if err := moveVolume(c, fc.session(), fc.copies("db"), "m2", moveOpts{grace: time.Second, readyTimeout: time.Minute}); err != nil {
		t.Fatalf("again: %v", err)
	}
	if !strings.Contains(out.String(), "m2 already is the Writer of db") || !strings.Contains(out.String(), "nothing to do") {
		t.Fatalf("again: %s", out)
	}
	if r, _, _ := fc.st.LastVolumeRun("lab", "db", "move"); r.Gen != 2 {
		t.Fatalf("nothing to do opened run %d", r.Gen)
	}
}

// TestMoveFinishRefusals: a Writer with no unfinished Move of this
// computer's is nothing to do; a source that does not answer fails
// before a run opens, naming it.
func TestMoveFinishRefusals(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	c, out, _ := fc.cmd()
	if err := moveVolume(c, fc.session(), fc.copies("db"), "m2", moveOpts{readyTimeout: time.Minute}); err != nil || !strings.Contains(out.String(), "nothing to do") {
		t.Fatalf("no run recorded: %v %s", err, out)
	}
	prev, _ := fc.st.BeginVolumeRun("lab", "db", "move", "m2", time.Now())
	prev.State, prev.Source = operator.RunLost, "m1"
	fc.st.SaveVolumeRun(prev) //nolint:errcheck
	cp := fc.copies("db")
	fc.down("m1")
	c, _, _ = fc.cmd()
	err := moveVolume(c, fc.session(), cp, "m2", moveOpts{readyTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "finish move gen 1 from m1") {
		t.Fatalf("source down: %v", err)
	}
	if r, _, _ := fc.st.LastVolumeRun("lab", "db", "move"); r.Gen != 1 {
		t.Fatalf("a refusal opened run %d", r.Gen)
	}
}

// TestMoveShipsFiles: a Container with shipped files (a secret) moves
// with their content, read from the source by export_container and
// created with it on the target; one whose source no longer answers the
// content is refused before a run opens, naming spec.files.
func TestMoveShipsFiles(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	id := fc.container("m1", "shop-production-db-0001", "db", "running")
	secret := []byte("hunter2")
	digest := "sha256:f52fbd32b2b3b86ff88ef6c490628285f482af15ddcb29541f94bcf526a3f6c7"
	ctr := fc.ms["m1"].ctrs[id]
	ctr.ex.Spec.Files = []rpc.FileSpec{{Target: "/run/secrets/pw", Digest: digest, Kind: "file", Mode: 0o400, Source: "secret:pw"}}
	ctr.ex.Files = map[string][]byte{digest: secret}
	c, _, _ := fc.cmd()
	mp, err := planMove(c, fc.session(), "db", "m1", "m2")
	if err != nil || len(mp.units) != 1 || string(mp.units[0].files[digest]) != "hunter2" {
		t.Fatalf("plan: %+v %v", mp.units, err)
	}
	r, stop, err := beginRun(c, fc.session(), fc.copies("db"), "move", "m2")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	mv := &mover{volumeRun: r, movePlan: mp}
	u := &mv.units[0]
	u.newName = "shop-production-db-0002"
	if err := mv.create(&operator.RunStep{}, u); err != nil {
		t.Fatal(err)
	}
	if got := fc.ms["m2"].ctrs[u.newID]; got == nil || string(got.ex.Files[digest]) != "hunter2" {
		t.Fatalf("the target's Container was created without the secret: %+v", got)
	}

	ctr.ex.Files = nil // an older source, or content it no longer holds
	if _, err := planMove(c, fc.session(), "db", "m1", "m2"); err == nil || !strings.Contains(err.Error(), "secret:pw") || !strings.Contains(err.Error(), "did not answer its content") {
		t.Fatalf("content missing: %v", err)
	}
}
