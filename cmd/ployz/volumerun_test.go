package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client/volumerun"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// fakecluster_test.go reads copies as Volume Runs did when they lived
// here; they are client/volumerun's now.
type copies = volumerun.Copies

func readCopies(c interface{ Context() context.Context }, s session, name string) (copies, error) {
	return volumerun.ReadCopies(c.Context(), s.ent, name)
}

func mountsVolume(spec *rpc.ContainerSpec, name string) bool { return volumerun.MountsVolume(spec, name) }

// TestVolumeRunOutput: the CLI prints a run's events and its end as it
// always has: the run line, steps indented under it, a Docker task's
// progress further, the run's state on stdout; a finished Move again is
// "nothing to do" on stdout and no run.
func TestVolumeRunOutput(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	oldID := fc.container("m1", "shop-production-db-0001", "db", "exited")
	c, out, errw := fc.cmd()
	rn := volumeRunner(c, fc.session())
	ctx := context.Background()
	// A Move that stopped past its point of no return: m2 promoted.
	prev, err := fc.st.BeginVolumeRun("lab", "db", "move", "m2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	prev.State, prev.Source, prev.Stopped = operator.RunFailed, "m1", []string{"shop-production-db-0001"}
	if err := fc.st.SaveVolumeRun(prev); err != nil {
		t.Fatal(err)
	}
	fc.serveTasks("m2", 0)
	res, err := rn.Move(ctx, "db", "m2", volumerun.MoveOptions{Grace: time.Second, ReadyTimeout: time.Minute})
	if err := printRun(c, res, err); err != nil {
		t.Fatalf("move: %v\n%s", err, errw)
	}
	for _, line := range []string{"volume db: move run gen 2\n", "  finishing move gen 1 (failed past its point of no return): m2 is the Writer\n",
		"  check-writer   m2       done: writer, floor gen 2\n", "  create         m2       done: shop-production-db-",
		"    m2: docker start shop-production-db-", "  remove-old     m1       done: shop-production-db-0001\n"} {
		if !strings.Contains(errw.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, errw)
		}
	}
	if out.String() != "volume db: move run gen 2 done\n" {
		t.Errorf("stdout %q", out)
	}
	if _, ok := fc.ms["m1"].ctrs[oldID]; ok {
		t.Error("the old Container is still on m1")
	}

	c, out, _ = fc.cmd()
	res, err = volumeRunner(c, fc.session()).Move(ctx, "db", "m2", volumerun.MoveOptions{ReadyTimeout: time.Minute})
	if err := printRun(c, res, err); err != nil || out.String() != "m2 already is the Writer of db and no Move of it to m2 is left unfinished here: nothing to do\n" {
		t.Fatalf("again: %v %q", err, out)
	}
}

// TestVolumeRunJSON: --json prints the run the library ended with, or
// run null with the message when nothing was needed; a refusal before a
// run prints nothing.
func TestVolumeRunJSON(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5, Floor: 1})
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror, Floor: 1})
	g.json = true
	defer func() { g.json = false }()
	c, out, errw := fc.cmd()
	res, err := volumeRunner(c, fc.session()).DeleteMirror(context.Background(), "db", "m2")
	if err := printRun(c, res, err); err != nil {
		t.Fatalf("delete-mirror: %v\n%s", err, errw)
	}
	var rec struct{ Run operator.VolumeRun }
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.Run.Kind != "delete-mirror" || rec.Run.State != operator.RunDone || len(rec.Run.Steps) != 3 {
		t.Fatalf("--json: %s (%v)", out, err)
	}

	c, out, _ = fc.cmd()
	res, err = volumeRunner(c, fc.session()).Restore(context.Background(), "db", "m1", false)
	var doc map[string]any
	if err := printRun(c, res, err); err != nil || json.Unmarshal(out.Bytes(), &doc) != nil || doc["run"] != nil || doc["writer"] != "m1" ||
		!strings.Contains(doc["message"].(string), "nothing to do") {
		t.Fatalf("nothing to do: %v %s", err, out)
	}

	c, out, errw = fc.cmd()
	res, err = volumeRunner(c, fc.session()).Sync(context.Background(), "db")
	if err := printRun(c, res, err); err == nil || !strings.Contains(err.Error(), "has no Mirror") || out.Len() != 0 || errw.Len() != 0 {
		t.Fatalf("a refusal: %v, stdout %q, stderr %q", err, out, errw)
	}
}

// TestPrintEvent: each kind of event is the line it always was.
func TestPrintEvent(t *testing.T) {
	var b strings.Builder
	p := printEvent(&b)
	p(volumerun.Event{Kind: volumerun.EventBegin, Text: "volume db: sync run gen 3"})
	p(volumerun.Event{Kind: volumerun.EventStep, Step: "send", Machine: "m2", Text: "done: full run-3: 100B direct"})
	p(volumerun.Event{Kind: volumerun.EventProgress, Step: "stop", Machine: "m1", Text: "m1: docker stop web-ab12 (busy, 12s)"})
	p(volumerun.Event{Kind: volumerun.EventNote, Machine: "m1", Text: "undone: m1 is the Writer of db again and its Containers run"})
	p(volumerun.Event{Kind: volumerun.EventWarning, Text: "volume run record not saved: disk full"})
	want := "volume db: sync run gen 3\n" +
		"  send           m2       done: full run-3: 100B direct\n" +
		"    m1: docker stop web-ab12 (busy, 12s)\n" +
		"  undone: m1 is the Writer of db again and its Containers run\n" +
		"warning: volume run record not saved: disk full\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
