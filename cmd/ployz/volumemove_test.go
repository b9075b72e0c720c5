package main

import (
	"context"
	"errors"
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

// fastAsks makes runTask ask a busy task again at once.
func fastAsks(t *testing.T) {
	was := taskAskEvery
	taskAskEvery = 5 * time.Millisecond
	t.Cleanup(func() { taskAskEvery = was })
}

// dockerCalls counts m's fake Docker calls of kind and its plain
// Container commands.
func (fc *fakeCluster) dockerCalls(m, kind string) (task, plain int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, c := range fc.ms[m].calls {
		switch c {
		case "docker " + kind:
			task++
		case kind + "_container", kind + "_image":
			plain++
		}
	}
	return task, plain
}

// TestMoveFinishesThroughTasks: on a Machine serving volume_task the
// pull (admitted against the Writer it already is) and the start go
// through tasks: asked again while busy, with progress lines, Docker
// called once each and the plain commands not at all.
func TestMoveFinishesThroughTasks(t *testing.T) {
	fastAsks(t)
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	oldID := fc.container("m1", "shop-production-db-0001", "db", "exited")
	key := creationKey(fc.ms["m1"].ctrs[oldID].ex.Spec, "db", 1, oldID)
	newID := fc.container("m2", key, "db", "created")
	fc.ms["m2"].images = []string{}
	fc.serveTasks("m2", 150*time.Millisecond)
	prev, _ := fc.st.BeginVolumeRun("lab", "db", "move", "m2", time.Now())
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	fc.st.SaveVolumeRun(prev) //nolint:errcheck

	c, _, errw := fc.cmd()
	if err := moveVolume(c, fc.session(), fc.copies("db"), "m2", moveOpts{grace: time.Second, readyTimeout: time.Minute}); err != nil {
		t.Fatalf("finish: %v\n%s", err, errw)
	}
	if fc.ms["m2"].ctrs[newID].state != "running" {
		t.Fatalf("%s is %s, want running", key, fc.ms["m2"].ctrs[newID].state)
	}
	for _, kind := range []string{"pull", "start"} {
		if task, plain := fc.dockerCalls("m2", kind); task != 1 || plain != 0 {
			t.Fatalf("docker %s: %d through the task, %d plain; want 1 and 0", kind, task, plain)
		}
	}
	for _, line := range []string{"    m2: docker pull app:1 (busy, 0s)", "    m2: docker pull app:1 (done, ",
		"    m2: docker start " + key + " (busy, 0s)", "    m2: docker start " + key + " (done, "} {
		if !strings.Contains(errw.String(), line) {
			t.Fatalf("no %q in:\n%s", line, errw)
		}
	}
	r, _, _ := fc.st.LastVolumeRun("lab", "db", "move")
	if r.State != operator.RunDone || len(r.Steps) < 4 || r.Steps[2].Name != "pull-image" || r.Steps[2].Outcome != operator.RunDone {
		t.Fatalf("run %+v", r)
	}
}

// TestMoveCutUndoThroughTasks: the cut's stop on the Writer and the
// undo's start (the source the Writer again) go through tasks admitted
// as writer; an older target (no volume_task) is not asked for them.
func TestMoveCutUndoThroughTasks(t *testing.T) {
	fastAsks(t)
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	id := fc.container("m1", "shop-production-db-0001", "db", "running")
	fc.serveTasks("m1", 100*time.Millisecond)
	c, _, errw := fc.cmd()
	mp, err := planMove(c, fc.session(), "db", "m1", "m2")
	if err != nil {
		t.Fatal(err)
	}
	err = runVolume(c, fc.session(), fc.copies("db"), "move", "m2", func(r *volumeRun) error {
		mv := &mover{volumeRun: r, movePlan: mp, grace: time.Second, readyTimeout: time.Minute}
		// m2 holds no snapshot in common with m1: the cut's send fails
		// after the stop and the demotion, and is undone.
		if err := mv.cut(volumecopy.Mirror); err != nil {
			return errors.Join(err, mv.undo())
		}
		return errors.New("the cut did not fail")
	})
	if err == nil || !strings.Contains(err.Error(), "no snapshot in common") {
		t.Fatalf("run: %v\n%s", err, errw)
	}
	if st := fc.ms["m1"].ctrs[id].state; st != "running" || fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer {
		t.Fatalf("after the undo: Container %s, copy %s; want running, writer\n%s", st, fc.ms["m1"].vols["db"].copy.Role, errw)
	}
	for _, kind := range []string{"stop", "start"} {
		if task, plain := fc.dockerCalls("m1", kind); task != 1 || plain != 0 {
			t.Fatalf("docker %s: %d through the task, %d plain; want 1 and 0", kind, task, plain)
		}
	}
	if !strings.Contains(errw.String(), "    m1: docker stop shop-production-db-0001 (busy, 0s)") || !strings.Contains(errw.String(), "undone: m1 is the Writer") {
		t.Fatalf("output:\n%s", errw)
	}
	r, _, _ := fc.st.LastVolumeRun("lab", "db", "move")
	if r.State != operator.RunUndone || len(r.Stopped) != 1 {
		t.Fatalf("run %+v, want undone with the stop recorded", r)
	}
}

// TestRunTaskCancelled: a run cancelled while Docker works gives up
// asking (the task on the Machine goes on to its own bound), and says
// so; a Machine without volume_task gets the plain command.
func TestRunTaskCancelled(t *testing.T) {
	fastAsks(t)
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	id := fc.container("m1", "web", "db", "running")
	fc.serveTasks("m1", time.Hour)
	c, _, errw := fc.cmd()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := &volumeRun{c: c, s: fc.session(), ctx: ctx, run: operator.VolumeRun{Volume: "db", Gen: 1}, errw: errw}
	direct := 0
	err := r.runTask(containerTask{machine: "m1", expect: volumecopy.Writer, what: "docker stop web",
		req: rpc.VolumeTaskRequest{Kind: rpc.TaskStop, Stop: &rpc.StopContainerRequest{ID: id}}, direct: func() error { direct++; return nil }})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "still busy") || direct != 0 {
		t.Fatalf("cancelled: %v (direct %d)", err, direct)
	}
	r.ctx = context.Background()
	err = r.runTask(containerTask{machine: "m2", expect: volumecopy.Writer, what: "docker stop web",
		req: rpc.VolumeTaskRequest{Kind: rpc.TaskStop}, direct: func() error { direct++; return nil }})
	if err != nil || direct != 1 {
		t.Fatalf("older Machine: %v (direct %d)", err, direct)
	}
}

// TestRunTaskNoAnswer: a Machine that stops answering while its task is
// busy is asked again for a while (it may be restarting), then the step
// fails with why.
func TestRunTaskNoAnswer(t *testing.T) {
	fastAsks(t)
	was := taskNoAnswerFor
	taskNoAnswerFor = 200 * time.Millisecond
	t.Cleanup(func() { taskNoAnswerFor = was })
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	id := fc.container("m2", "web", "db", "exited")
	fc.serveTasks("m2", time.Hour)
	c, _, errw := fc.cmd()
	r := &volumeRun{c: c, s: fc.session(), ctx: context.Background(), run: operator.VolumeRun{Volume: "db", Gen: 1}, errw: errw}
	go func() { time.Sleep(100 * time.Millisecond); fc.down("m2") }()
	start := time.Now()
	err := r.runTask(containerTask{machine: "m2", expect: volumecopy.Writer, what: "docker start web",
		req: rpc.VolumeTaskRequest{Kind: rpc.TaskStart, Start: &rpc.ContainerRef{ID: id}}, direct: func() error { return errors.New("direct") }})
	if err == nil || time.Since(start) > 5*time.Second || !strings.Contains(errw.String(), "m2: docker start web (no answer: ") {
		t.Fatalf("after m2 went away: %v in %s\n%s", err, time.Since(start), errw)
	}
}
