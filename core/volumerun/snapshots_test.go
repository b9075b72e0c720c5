package volumerun

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/internal/fakecluster"
)

// rollbackRoute serves rollback_volume on m as the daemon admits it
// (volumecopy.AdmitRollback against m's copy, running Containers and
// tasks), and rolls the fake volume's snapshot list back like zfs
// rollback [-r]: no ZFS here (it runs only inside the VM Machines).
func (fc *fakeCluster) rollbackRoute(srv *rpc.Server, m *fakeMachine) {
	fakecluster.HandleMethod(fc.Cluster, srv, m.Machine, rpc.RollbackVolume, func(req rpc.RollbackVolumeRequest) (rpc.VolumeRolledBack, error) {
		m.Calls = append(m.Calls, rpc.CmdRollbackVolume)
		if err := req.Validate(); err != nil {
			return rpc.VolumeRolledBack{}, err
		}
		v, ok := m.vols[req.Volume]
		if !ok {
			return rpc.VolumeRolledBack{}, rpc.Errorf(rpc.CodeNotFound, "name: no volume %q on this Machine", req.Volume)
		}
		f := volumecopy.Facts{Exists: true, Busy: m.tasks.Running(req.Volume)}
		for _, c := range m.Ctrs {
			if c.State == "running" && MountsVolume(&c.Spec, req.Volume) {
				f.MountedBy = append(f.MountedBy, c.Name)
			}
		}
		if err := volumecopy.AdmitRollback(v.copy, req.Volume, req.Gen, f); err != nil {
			return rpc.VolumeRolledBack{}, err
		}
		if fc.holdRollback != nil {
			// Waits with the Cluster unlocked, as a stuck Machine keeps
			// the others answering.
			fc.Unlock()
			<-fc.holdRollback
			fc.Lock()
		}
		if fc.failRollback {
			return rpc.VolumeRolledBack{}, rpc.Errorf(rpc.CodeUnavailable, "snapshot: roll %s back: zfs: pool I/O error", req.Volume)
		}
		i := slices.Index(v.snaps, req.Snapshot)
		if i < 0 {
			return rpc.VolumeRolledBack{}, rpc.Errorf(rpc.CodeNotFound, "snapshot: volume %q has no snapshot %q", req.Volume, req.Snapshot)
		}
		newer := slices.Clone(v.snaps[i+1:])
		if len(newer) > 0 && !req.DestroyNewer {
			return rpc.VolumeRolledBack{}, rpc.Errorf(rpc.CodeFailedPrecond, "snapshot: newer: %v", newer)
		}
		v.snaps = v.snaps[:i+1]
		c := v.copy.View()
		return rpc.VolumeRolledBack{MachineID: m.ID(), Volume: rpc.Volume{Name: req.Volume, Copy: &c, Snapshots: v.snapshots()}, Destroyed: newer}, nil
	})
}

// snapCluster is m1 the Writer of db holding s1 and s2 with a running
// Container mounting it, and a Mirror on m2.
func snapCluster(t *testing.T) (*fakeCluster, string) {
	fc := newFakeCluster(t, "m1", "m2")
	fc.volume("m1", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 5})
	fc.snaps("m1", "db", "s1", "s2")
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Mirror})
	fc.snaps("m2", "db", "s1")
	return fc, fc.container("m1", "shop-production-db-0001", "db", "running")
}

func restoreSnap(fc *fakeCluster, snap string, o SnapshotRestoreOptions) (Result, string, error) {
	fc.events.reset()
	res, err := fc.runner().RestoreSnapshot(context.Background(), "db", snap, o)
	return res, fc.events.String(), err
}

// refusedBy checks err is an *rpc.Error naming field whose message says
// each of words.
func refusedBy(t *testing.T, what string, err error, field string, words ...string) {
	t.Helper()
	var e *rpc.Error
	if !errors.As(err, &e) || e.Details["field"] != field {
		t.Fatalf("%s: %v, want a refusal naming %s", what, err, field)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Errorf("%s: %q does not say %q", what, e.Message, w)
		}
	}
}

// TestRestoreSnapshot: refused, opening no run and changing nothing,
// while the Container runs (without --stop) and while newer snapshots
// would go (without --force); with both the Container is stopped, the
// copy rolled back and the Container started again, each a step.
func TestRestoreSnapshot(t *testing.T) {
	fc, id := snapCluster(t)
	_, _, err := restoreSnap(fc, "s1", SnapshotRestoreOptions{Force: true})
	refusedBy(t, "running, no --stop", err, "--stop", "shop-production-db-0001 on m1", "--stop")
	_, _, err = restoreSnap(fc, "s1", SnapshotRestoreOptions{Stop: true})
	refusedBy(t, "newer, no --force", err, "--force", "destroys what is newer on m1: s2")
	if _, ok, _ := fc.runner().LastRun(context.Background(), "db", KindSnapshotRestore); ok {
		t.Fatal("a refusal opened a run")
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "running" || len(fc.ms["m1"].vols["db"].snaps) != 2 {
		t.Fatalf("a refusal changed something: Container %s, snapshots %v", st, fc.ms["m1"].vols["db"].snaps)
	}

	res, errw, err := restoreSnap(fc, "s1", SnapshotRestoreOptions{Stop: true, Force: true, Grace: time.Second})
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, errw)
	}
	r := *res.Run
	want := "check-writer/done@m1 stop/done@m1 rollback/done@m1 start/done@m1"
	if got := stepsOf(r); got != want || r.State != operator.RunDone || r.Kind != KindSnapshotRestore || r.Source != "m1" {
		t.Fatalf("run %s %s %s, steps\n%s\nwant\n%s", r.Kind, r.State, r.Source, got, want)
	}
	if d := r.Steps[2].Detail; d != "to s1, destroyed s2" {
		t.Errorf("rollback detail %q", d)
	}
	if got := fc.ms["m1"].vols["db"].snaps; !slices.Equal(got, []string{"s1"}) {
		t.Errorf("m1 snapshots %v, want [s1]", got)
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "running" {
		t.Errorf("Container %s after, want running", st)
	}
	if !strings.Contains(errw, "db on m1 is back at s1") {
		t.Errorf("output:\n%s", errw)
	}
	// The newest snapshot needs no --force, and a stopped Container no
	// --stop: one step then.
	fc.SetState(fc.ms["m1"].Machine, id, "exited")
	res, errw, err = restoreSnap(fc, "s1", SnapshotRestoreOptions{})
	if err != nil || stepsOf(*res.Run) != "check-writer/done@m1 rollback/done@m1" {
		t.Fatalf("again: %v %+v\n%s", err, res.Run, errw)
	}
}

// TestRestoreSnapshotRefusals: a snapshot that is not there (named,
// with those that are), a Mirror's copy, a volume with no Writer.
func TestRestoreSnapshotRefusals(t *testing.T) {
	fc, _ := snapCluster(t)
	_, _, err := restoreSnap(fc, "nope", SnapshotRestoreOptions{Stop: true, Force: true})
	refusedBy(t, "no such snapshot", err, "snapshot", `no snapshot "nope"`, "it has: s1, s2")
	_, _, err = restoreSnap(fc, "s1", SnapshotRestoreOptions{Machine: "m2", Stop: true, Force: true})
	refusedBy(t, "a Mirror", err, "--machine", "m2's copy of db is mirror, not the Writer")
	_, _, err = restoreSnap(fc, "bad@name", SnapshotRestoreOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "SNAPSHOT:") {
		t.Errorf("bad snapshot name: %v", err)
	}
	fc.ms["m1"].vols["db"].copy = volumecopy.Copy{Role: volumecopy.Mirror}
	_, _, err = restoreSnap(fc, "s1", SnapshotRestoreOptions{Stop: true, Force: true})
	refusedBy(t, "no Writer", err, "name", "has no Writer")
	if slices.Contains(fc.ms["m1"].Calls, rpc.CmdRollbackVolume) || slices.Contains(fc.ms["m2"].Calls, rpc.CmdRollbackVolume) {
		t.Error("a refusal reached a Machine's rollback")
	}
}

// TestRestoreSnapshotUndo: a rollback that fails starts the stopped
// Container again; the run ends undone, the snapshots as they were.
func TestRestoreSnapshotUndo(t *testing.T) {
	fc, id := snapCluster(t)
	fc.failRollback = true
	res, errw, err := restoreSnap(fc, "s1", SnapshotRestoreOptions{Stop: true, Force: true})
	if err == nil || !strings.Contains(err.Error(), "pool I/O error") {
		t.Fatalf("want the rollback's error, got %v\n%s", err, errw)
	}
	r := *res.Run
	if got := stepsOf(r); got != "check-writer/done@m1 stop/done@m1 rollback/failed@m1 undo-start/done@m1" || r.State != operator.RunUndone {
		t.Fatalf("run %s, steps %s", r.State, got)
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "running" || len(fc.ms["m1"].vols["db"].snaps) != 2 {
		t.Errorf("after undo: Container %s, snapshots %v", st, fc.ms["m1"].vols["db"].snaps)
	}
}

// TestRestoreSnapshotBounded: a Writer that never answers rollback_volume
// (TestVMLab/snapshot-restore's CLI once waited 4 minutes, silent) is
// reported while it is waited for, and after the bound the run fails
// naming the Machine, starting the stopped Container again.
func TestRestoreSnapshotBounded(t *testing.T) {
	fc, id := snapCluster(t)
	fc.holdRollback = make(chan struct{})
	t.Cleanup(func() { close(fc.holdRollback) })
	fc.waits.rollback, fc.waits.showEvery = 600*time.Millisecond, 100*time.Millisecond
	start := time.Now()
	res, errw, err := restoreSnap(fc, "s1", SnapshotRestoreOptions{Stop: true, Force: true})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the restore took %s with a 600ms rollback bound", took)
	}
	if err == nil || !strings.Contains(err.Error(), "no answer after 600ms") || !strings.Contains(err.Error(), "on m1") {
		t.Fatalf("want the bound's error naming m1, got %v\n%s", err, errw)
	}
	if !strings.Contains(fc.events.String(), "m1: rollback of db to s1: waiting for its answer") {
		t.Errorf("no progress while waiting:\n%s", &fc.events)
	}
	r := *res.Run
	if got := stepsOf(r); got != "check-writer/done@m1 stop/done@m1 rollback/failed@m1 undo-start/done@m1" || r.State != operator.RunUndone {
		t.Fatalf("run %s, steps %s", r.State, got)
	}
	if st := fc.ms["m1"].Ctrs[id].State; st != "running" {
		t.Errorf("after the bound: Container %s, want running again", st)
	}
}

// TestNewerThan names the snapshots after the target and the bookmarks
// made after it.
func TestNewerThan(t *testing.T) {
	v := rpc.Volume{Snapshots: []rpc.VolumeSnapshot{{Name: "a", Created: 10}, {Name: "b", Created: 20}, {Name: "c", Created: 30}},
		Bookmarks: []rpc.VolumeBookmark{{Name: "run-1", Created: 5}, {Name: "run-2", Created: 25}}}
	if got := NewerThan(v, "b"); strings.Join(got, ",") != "c,#run-2" {
		t.Errorf("newer than b: %v", got)
	}
	if got := NewerThan(v, "c"); got != nil {
		t.Errorf("newer than the newest: %v", got)
	}
}

// TestLocateWriter: without --machine, snapshot ls asks the Writer's
// Machine even with a Mirror elsewhere; with Mirrors only it asks for
// --machine; a volume's only copy is its own answer.
func TestLocateWriter(t *testing.T) {
	fc, _ := snapCluster(t)
	ctx := context.Background()
	if m, err := fc.runner().locateWriter(ctx, "db"); err != nil || m != "m1" {
		t.Fatalf("with a Writer on m1: %q, %v", m, err)
	}
	fc.ms["m1"].vols["db"].copy = volumecopy.Copy{Role: volumecopy.Mirror}
	_, err := fc.runner().locateWriter(ctx, "db")
	refusedBy(t, "Mirrors only", err, "name", "no single Writer", "m1, m2", "--machine")
	delete(fc.ms["m2"].vols, "db")
	if m, err := fc.runner().locateWriter(ctx, "db"); err != nil || m != "m1" {
		t.Fatalf("one copy: %q, %v", m, err)
	}
	_, err = fc.runner().locateWriter(ctx, "nosuch")
	refusedBy(t, "no such volume", err, "name", `no Machine holds a volume "nosuch"`)
}
