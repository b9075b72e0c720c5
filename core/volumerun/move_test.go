package volumerun

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
	spec := fc.ms["m1"].Ctrs[oldID].Spec
	key := creationKey(spec, "db", 1, oldID)
	newID := fc.container("m2", key, "db", "created")
	fc.pointTo("m1", oldID)

	prev, err := fc.beginRun("db", "move", "m2")
	if err != nil {
		t.Fatal(err)
	}
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	prev.Steps = []operator.RunStep{{Name: "check-writer", Machine: "m1", Outcome: operator.RunDone},
		{Name: "promote", Machine: "m2", Outcome: operator.RunDone}, {Name: "create", Machine: "m2", Outcome: operator.RunDone},
		{Name: "start", Machine: "m2", Outcome: operator.RunFailed}}
	if err := fc.saveRun(prev); err != nil {
		t.Fatal(err)
	}

	res, err := fc.runner().Move(context.Background(), "db", "m2", MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute})
	if err != nil || res.Run == nil || res.Run.State != operator.RunDone {
		t.Fatalf("finish: %+v %v\n%s", res, err, &fc.events)
	}
	if len(fc.ms["m2"].Ctrs) != 1 || fc.ms["m2"].Ctrs[newID].State != "running" {
		t.Fatalf("m2's Containers: %+v, want %s alone and running", fc.ms["m2"].Ctrs, key)
	}
	if _, ok := fc.ms["m1"].Ctrs[oldID]; ok || len(fc.ms["m1"].Ctrs) != 1 {
		t.Fatalf("m1 kept the old Container or lost the other: %+v", fc.ms["m1"].Ctrs)
	}
	p := fc.Pointer(serving.ServiceKey("shop-production", "db"))
	if len(p.Containers) != 1 || p.Containers[0].ID != newID || p.Containers[0].MachineID != "id-m2" {
		t.Fatalf("pointer %+v, want the new Container on m2", p)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "move")
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
	if !strings.Contains(fc.events.String(), "finishing move gen 1") {
		t.Fatalf("events:\n%s", &fc.events)
	}
	// The Writer's floor rose to the run's gen; the Mirror's too.
	if fc.ms["m2"].vols["db"].copy.Floor != 2 || fc.ms["m1"].vols["db"].copy.Floor != 2 {
		t.Fatalf("floors %d %d, want 2", fc.ms["m2"].vols["db"].copy.Floor, fc.ms["m1"].vols["db"].copy.Floor)
	}

	res, err = fc.runner().Move(context.Background(), "db", "m2", MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute})
	if err != nil || res.Run != nil || res.Nothing == nil || res.Nothing.Writer != "m2" ||
		!strings.Contains(res.Nothing.Message, "m2 already is the Writer of db") || !strings.Contains(res.Nothing.Message, "nothing to do") {
		t.Fatalf("again: %+v %v", res, err)
	}
	if r, _, _ := fc.runner().LastRun(context.Background(), "db", "move"); r.Gen != 2 {
		t.Fatalf("nothing to do opened run %d", r.Gen)
	}
}

// TestMoveFinishRefusals: a Writer with no unfinished Move of this
// computer's is nothing to do; a source that does not answer fails
// before a run opens, naming it.
func TestMoveFinishRefusals(t *testing.T) {
	fc := newFakeCluster(t, "m2", "m1") // the entry is m2: m1 goes down
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	if res, err := fc.runner().Move(context.Background(), "db", "m2", MoveOptions{}); err != nil || res.Nothing == nil || !strings.Contains(res.Nothing.Message, "nothing to do") {
		t.Fatalf("no run recorded: %+v %v", res, err)
	}
	prev, _ := fc.beginRun("db", "move", "m2")
	prev.State, prev.Source = operator.RunLost, "m1"
	fc.saveRun(prev)
	fc.down("m1")
	res, err := fc.runner().Move(context.Background(), "db", "m2", MoveOptions{ReadyTimeout: time.Minute})
	if err == nil || res.Run != nil || !strings.Contains(err.Error(), "finish move gen 1 from m1") {
		t.Fatalf("source down: %v", err)
	}
	if r, _, _ := fc.runner().LastRun(context.Background(), "db", "move"); r.Gen != 1 {
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
	ctr := fc.ms["m1"].Ctrs[id]
	ctr.Spec.Files = []rpc.FileSpec{{Target: "/run/secrets/pw", Digest: digest, Kind: "file", Mode: 0o400, Source: "secret:pw"}}
	ctr.Files = map[string][]byte{digest: secret}
	ctx, rn := context.Background(), fc.runner()
	mp, err := rn.planMove(ctx, "db", "m1", "m2")
	if err != nil || len(mp.units) != 1 || string(mp.units[0].files[digest]) != "hunter2" {
		t.Fatalf("plan: %+v %v", mp.units, err)
	}
	r, err := rn.beginRun(ctx, fc.copies("db"), "move", "m2")
	if err != nil {
		t.Fatal(err)
	}
	mv := &mover{volumeRun: r, movePlan: mp}
	u := &mv.units[0]
	u.newName = "shop-production-db-0002"
	if err := mv.create(&operator.RunStep{}, u); err != nil {
		t.Fatal(err)
	}
	if got := fc.ms["m2"].Ctrs[u.newID]; got == nil || string(got.Files[digest]) != "hunter2" {
		t.Fatalf("the target's Container was created without the secret: %+v", got)
	}

	ctr.Files = nil // an older source, or content it no longer holds
	if _, err := rn.planMove(ctx, "db", "m1", "m2"); err == nil || !strings.Contains(err.Error(), "secret:pw") || !strings.Contains(err.Error(), "did not answer its content") {
		t.Fatalf("content missing: %v", err)
	}
}

// fastAsks makes fc's runs ask a busy task again at once.
func (fc *fakeCluster) fastAsks() { fc.waits.askEvery = 5 * time.Millisecond }

// dockerCalls counts m's fake Docker calls of kind and its plain
// Container commands.
func (fc *fakeCluster) dockerCalls(m, kind string) (task, plain int) {
	fc.Lock()
	defer fc.Unlock()
	for _, c := range fc.ms[m].Calls {
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
	fc := newFakeCluster(t, "m1", "m2")
	fc.fastAsks()
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	oldID := fc.container("m1", "shop-production-db-0001", "db", "exited")
	key := creationKey(fc.ms["m1"].Ctrs[oldID].Spec, "db", 1, oldID)
	newID := fc.container("m2", key, "db", "created")
	fc.ms["m2"].Images = []string{}
	fc.serveTasks("m2", 150*time.Millisecond)
	prev, _ := fc.beginRun("db", "move", "m2")
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	fc.saveRun(prev)

	if _, err := fc.runner().Move(context.Background(), "db", "m2", MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute}); err != nil {
		t.Fatalf("finish: %v\n%s", err, &fc.events)
	}
	if fc.ms["m2"].Ctrs[newID].State != "running" {
		t.Fatalf("%s is %s, want running", key, fc.ms["m2"].Ctrs[newID].State)
	}
	for _, kind := range []string{"pull", "start"} {
		if task, plain := fc.dockerCalls("m2", kind); task != 1 || plain != 0 {
			t.Fatalf("docker %s: %d through the task, %d plain; want 1 and 0", kind, task, plain)
		}
	}
	for _, line := range []string{"m2: docker pull app:1 (busy, 0s)", "m2: docker pull app:1 (done, ",
		"m2: docker start " + key + " (busy, 0s)", "m2: docker start " + key + " (done, "} {
		if !fc.reported(EventProgress, "m2", line) {
			t.Fatalf("no progress %q in:\n%s", line, &fc.events)
		}
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "move")
	if r.State != operator.RunDone || len(r.Steps) < 4 || r.Steps[2].Name != "pull-image" || r.Steps[2].Outcome != operator.RunDone {
		t.Fatalf("run %+v", r)
	}
}

// TestMoveCutUndoThroughTasks: the cut's stop on the Writer and the
// undo's start (the source the Writer again) go through tasks admitted
// as writer; an older target (no volume_task) is not asked for them.
func TestMoveCutUndoThroughTasks(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.fastAsks()
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	id := fc.container("m1", "shop-production-db-0001", "db", "running")
	fc.serveTasks("m1", 100*time.Millisecond)
	ctx, rn := context.Background(), fc.runner()
	mp, err := rn.planMove(ctx, "db", "m1", "m2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := rn.runVolume(ctx, fc.copies("db"), "move", "m2", func(r *volumeRun) error {
		mv := &mover{volumeRun: r, movePlan: mp, MoveOptions: MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute}}
		// m2 holds no snapshot in common with m1: the cut's send fails
		// after the stop and the demotion, and is undone.
		if err := mv.cut(volumecopy.Mirror); err != nil {
			return errors.Join(err, mv.undo())
		}
		return errors.New("the cut did not fail")
	})
	if err == nil || !strings.Contains(err.Error(), "no snapshot in common") || res.Run == nil || res.Run.State != operator.RunUndone {
		t.Fatalf("run: %+v %v\n%s", res, err, &fc.events)
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "running" || fc.ms["m1"].vols["db"].copy.Role != volumecopy.Writer {
		t.Fatalf("after the undo: Container %s, copy %s; want running, writer\n%s", st, fc.ms["m1"].vols["db"].copy.Role, &fc.events)
	}
	for _, kind := range []string{"stop", "start"} {
		if task, plain := fc.dockerCalls("m1", kind); task != 1 || plain != 0 {
			t.Fatalf("docker %s: %d through the task, %d plain; want 1 and 0", kind, task, plain)
		}
	}
	if !fc.reported(EventProgress, "m1", "m1: docker stop shop-production-db-0001 (busy, 0s)") || !fc.reported(EventNote, "m1", "undone: m1 is the Writer") {
		t.Fatalf("events:\n%s", &fc.events)
	}
	r, _, _ := fc.runner().LastRun(context.Background(), "db", "move")
	if r.State != operator.RunUndone || len(r.Stopped) != 1 {
		t.Fatalf("run %+v, want undone with the stop recorded", r)
	}
}

// TestRunTaskCancelled: a run cancelled while Docker works gives up
// asking (the task on the Machine goes on to its own bound), and says
// so; a Machine without volume_task gets the plain command.
func TestRunTaskCancelled(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.fastAsks()
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	id := fc.container("m1", "web", "db", "running")
	fc.serveTasks("m1", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	rn := fc.runner()
	r := &volumeRun{Runner: rn, ctx: ctx, run: operator.VolumeRun{Volume: "db", Gen: 1}, waits: rn.waits.orDefault()}
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
	fc := newFakeCluster(t, "m1", "m2")
	fc.fastAsks()
	fc.waits.noAnswerFor = 200 * time.Millisecond
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	id := fc.container("m2", "web", "db", "exited")
	fc.serveTasks("m2", time.Hour)
	rn := fc.runner()
	r := &volumeRun{Runner: rn, ctx: context.Background(), run: operator.VolumeRun{Volume: "db", Gen: 1}, waits: rn.waits.orDefault()}
	go func() { time.Sleep(100 * time.Millisecond); fc.down("m2") }()
	start := time.Now()
	err := r.runTask(containerTask{machine: "m2", expect: volumecopy.Writer, what: "docker start web",
		req: rpc.VolumeTaskRequest{Kind: rpc.TaskStart, Start: &rpc.ContainerRef{ID: id}}, direct: func() error { return errors.New("direct") }})
	if err == nil || time.Since(start) > 5*time.Second || !fc.reported(EventProgress, "m2", "m2: docker start web (no answer: ") {
		t.Fatalf("after m2 went away: %v in %s\n%s", err, time.Since(start), &fc.events)
	}
}

// reported says whether fc's runs reported an event of kind about
// machine whose text begins with prefix.
func (fc *fakeCluster) reported(kind EventKind, machine, prefix string) bool {
	fc.events.mu.Lock()
	defer fc.events.mu.Unlock()
	for _, e := range fc.events.all {
		if e.Kind == kind && e.Machine == machine && strings.HasPrefix(e.Text, prefix) {
			return true
		}
	}
	return false
}

// TestMoveAndOneOffRuns: a one-off run on the volume is never moved; a
// running one holds the move back, naming it, until it ended.
func TestMoveAndOneOffRuns(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.container("m1", "shop-production-db-0001", "db", "running")
	run := fc.container("m1", "shop-production-db-run-0002", "db", "running")
	fc.Lock()
	fc.ms["m1"].Ctrs[run].Spec.Kind = rpc.KindRun
	fc.Unlock()
	ctx, rn := context.Background(), fc.runner()
	if _, err := rn.planMove(ctx, "db", "m1", "m2"); err == nil || !strings.Contains(err.Error(), "shop-production-db-run-0002, a one-off `ployz run` of service db, is running on volume db") {
		t.Fatalf("a running run on the volume: %v", err)
	}
	fc.Lock()
	fc.ms["m1"].Ctrs[run].State = "exited"
	fc.Unlock()
	mp, err := rn.planMove(ctx, "db", "m1", "m2")
	if err != nil || len(mp.units) != 1 || mp.units[0].old.Name != "shop-production-db-0001" {
		t.Fatalf("an ended run beside the Service: %+v, %v", mp.units, err)
	}
}
