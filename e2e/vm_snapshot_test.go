package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// vmSnapshotRestore follows vmMoveFinish (m2 the Writer of db with the
// Service running, m1 a level Mirror): write, snapshot keep, write more,
// sync (the Mirror now holds the newer data); snapshot ls lists keep as
// an operator's snapshot; restore is refused while the Service runs
// (without --stop), for a snapshot that is not there, on the Mirror, and
// for the newer run snapshot (without --force); restore --stop --force
// brings the data back with the Service stopped and started again (the
// same Container, running); a sync after brings the Mirror back to it.
func vmSnapshotRestore(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, serviceOn func(string) string) {
	refused := refuser(op)
	sum := func(m string) string { return volumeFileSum(ctx, t, l, m, "db", "marker") }
	fill := func(n int) {
		if out, err := fillVolume(ctx, l, "m2", "db", "marker", n); err != nil {
			t.Fatalf("write marker on m2: %v: %s", err, out)
		}
	}
	running := serviceOn("m2")
	if !strings.HasSuffix(running, "running") {
		t.Fatalf("before: the Service on m2 is %q", running)
	}
	fill(64 << 10)
	kept := sum("m2")
	op.must(t, "volume", "snapshot", "db", "keep", "--machine", "m2") // m1 holds a Mirror: the plain command asks which
	fill(128 << 10)
	op.must(t, "volume", "sync", "db")
	if sum("m1") == kept {
		t.Fatal("the Mirror did not get the newer marker")
	}

	var ls struct {
		Snapshots rpc.VolumeSnapshots `json:"snapshots"`
	}
	op.json(t, &ls, "volume", "snapshot", "ls", "db")
	var newer []string
	found := false
	for _, s := range ls.Snapshots.Snapshots {
		switch {
		case s.Name == "keep":
			found = true
			if s.Auto || s.Kept || s.Created == 0 {
				t.Fatalf("snapshot ls: keep is %+v; want an operator's snapshot with its creation time", s)
			}
		case found:
			newer = append(newer, s.Name)
		}
	}
	if !found || len(newer) == 0 || ls.Snapshots.Copy == nil || ls.Snapshots.Copy.Role != "writer" {
		t.Fatalf("snapshot ls: %+v; want keep, then the sync's run snapshot, on the Writer", ls.Snapshots)
	}

	refused(t, "--stop: running Container", "volume", "snapshot", "restore", "db", "keep", "--force")
	refused(t, `no snapshot "nope"`, "volume", "snapshot", "restore", "db", "nope", "--stop")
	refused(t, "m1's copy of db is mirror, not the Writer", "volume", "snapshot", "restore", "db", "keep", "--machine", "m1", "--stop")
	refused(t, newer[0], "volume", "snapshot", "restore", "db", "keep", "--stop")
	if sum("m2") == kept || serviceOn("m2") != running {
		t.Fatal("a refused restore changed the volume or the Service")
	}

	_, errs, code := op.run(t, "volume", "snapshot", "restore", "db", "keep", "--stop", "--force")
	t.Logf("snapshot restore:\n%s", errs)
	if code != 0 {
		t.Fatalf("snapshot restore --stop --force: exit %d", code)
	}
	var runs struct {
		Runs []struct {
			Kind, State string
			Steps       []struct{ Name, Outcome, Detail string }
		} `json:"runs"`
	}
	op.json(t, &runs, "volume", "runs", "db", "--limit", "1")
	var steps []string
	for _, st := range runs.Runs[0].Steps {
		steps = append(steps, st.Name+"/"+st.Outcome)
	}
	if r := runs.Runs[0]; r.Kind != "snapshot-restore" || r.State != "done" || strings.Join(steps, " ") != "check-writer/done stop/done rollback/done start/done" {
		t.Fatalf("the run: %s %s, steps %s", r.Kind, r.State, steps)
	}
	if got := sum("m2"); got != kept {
		t.Fatalf("marker on m2 after the restore: %s, want %s (as at keep)", got, kept)
	}
	if on := serviceOn("m2"); on != running {
		t.Fatalf("the Service on m2 after the restore: %q, want %q again", on, running)
	}
	// The Mirror holds the newer data until a sync.
	op.must(t, "volume", "sync", "db")
	if got := sum("m1"); got != kept {
		t.Fatalf("marker on the Mirror after the sync: %s, want %s", got, kept)
	}
}
