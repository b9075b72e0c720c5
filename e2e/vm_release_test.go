package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// vmPruneRelease, on real ZFS: several Syncs leave the Writer exactly two
// run snapshots plus bookmarks of the older ones, and the Mirror two run
// snapshots; a Mirror rolled back behind the Writer's snapshots still
// syncs incrementally, from the Writer's bookmark. Then a Release with
// the Service's Container running on m1: both copies end Mirrors with
// equal checksums, the Container stopped; releasing again is nothing to
// do; `volume restore --from m2` brings a Writer back.
func vmPruneRelease(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, refused func(*testing.T, string, ...string)) {
	// Runs alone too (-run TestVMVolumes/volume-prune-release).
	op.must(t, "machine", "update", "m2", "--zfs-pool", "ployz")
	const ds = "ployz/ployz/volumes/rel"
	op.must(t, "volume", "create", "rel", "--machine", "m1", "--size", "128MiB")
	fill := func(file string, size int) {
		t.Helper()
		if out, err := fillVolume(ctx, l, "m1", "rel", file, size); err != nil {
			t.Fatalf("write %s: %v: %s", file, err, out)
		}
	}
	sums := func(m string) string {
		t.Helper()
		out, err := l.Exec(ctx, m, "sh", "-c", "cd /var/lib/ployz/volumes/rel && sha256sum $(ls | sort)")
		if err != nil {
			t.Fatalf("checksums on %s: %v: %s", m, err, out)
		}
		return out
	}
	zlist := func(m, kind string) []string {
		t.Helper()
		out, err := l.Exec(ctx, m, "zfs", "list", "-H", "-t", kind, "-d", "1", "-s", "createtxg", "-o", "name", ds)
		if err != nil {
			t.Fatalf("zfs list -t %s on %s: %v: %s", kind, m, err, out)
		}
		var names []string
		for _, n := range strings.Fields(out) {
			names = append(names, n[len(ds):]) // @snap or #bookmark
		}
		return names
	}
	fill("base", 8<<20)
	if out, err := l.Exec(ctx, "m1", "zfs", "snapshot", ds+"@mine"); err != nil {
		t.Fatalf("an operator's own snapshot: %v: %s", err, out)
	}
	var run runDoc
	op.json(t, &run, "volume", "mirror", "rel", "--to", "m2")
	for i, f := range []string{"a", "b", "c"} {
		fill(f, 1<<20)
		run = runDoc{}
		op.json(t, &run, "volume", "sync", "rel")
		if run.Run.State != "done" {
			t.Fatalf("sync %d: %+v", i, run.Run)
		}
	}
	// Four runs: the Writer keeps the newest two, bookmarks the others
	// and keeps the operator's own.
	snaps, marks := zlist("m1", "snapshot"), zlist("m1", "bookmark")
	t.Logf("m1 snapshots %v, bookmarks %v; m2 snapshots %v", snaps, marks, zlist("m2", "snapshot"))
	newest := snaps[len(snaps)-1]
	if strings.Join(snaps, " ") != "@mine "+snaps[1]+" "+newest || len(marks) < 2 || !strings.HasPrefix(snaps[1], "@run-") {
		t.Fatalf("m1 holds snapshots %v and bookmarks %v: want @mine and two run snapshots, older runs bookmarked", snaps, marks)
	}
	m2snaps := zlist("m2", "snapshot")
	if len(m2snaps) != 2 || m2snaps[1] != newest {
		t.Fatalf("m2 holds %v: want two run snapshots ending %s", m2snaps, newest)
	}
	inspect := func(m string) rpc.Volume {
		t.Helper()
		var ls struct {
			Volume rpc.Volume `json:"volume"`
		}
		op.json(t, &ls, "volume", "inspect", "rel", "--machine", m)
		return ls.Volume
	}
	if v := inspect("m1"); len(v.Bookmarks) != len(marks) || v.Bookmarks[0].GUID == "" {
		t.Fatalf("inspect lists bookmarks %+v, zfs %v", v.Bookmarks, marks)
	}

	// m2 falls behind: rolled back to its older run snapshot, which the
	// Writer prunes at the next run. The Sync still sends an increment,
	// from the Writer's bookmark.
	if out, err := l.Exec(ctx, "m2", "zfs", "rollback", "-r", ds+m2snaps[0]); err != nil {
		t.Fatalf("roll m2 back: %v: %s", err, out)
	}
	fill("d", 1<<20)
	run = runDoc{}
	op.json(t, &run, "volume", "sync", "rel")
	base := strings.TrimPrefix(m2snaps[0], "@")
	var detail string
	for _, s := range run.Run.Steps {
		if s.Name == "send" {
			detail = s.Detail
		}
	}
	if run.Run.State != "done" || !strings.Contains(detail, "incremental "+base+" → ") {
		t.Fatalf("sync of a Mirror behind: %q: %+v", detail, run.Run)
	}
	if marks := zlist("m1", "bookmark"); !strings.Contains(strings.Join(marks, " "), "#"+base) {
		t.Fatalf("the base %s is not a bookmark on m1: %v", base, marks)
	}
	if a, b := sums("m1"), sums("m2"); a != b || !strings.Contains(a+"\n", "  d\n") {
		t.Fatalf("after the sync from a bookmark: m1 %q, m2 %q", a, b)
	}

	// Release with the Service's Container running on the Writer.
	f := filepath.Join(t.TempDir(), "compose.yaml")
	doc := "name: relapp\nservices:\n  app:\n    image: " + lab.TestAppImage + "\n    volumes: [\"/var/lib/ployz/volumes/rel:/data\"]\n"
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	op.must(t, "deploy", "-f", f, "-y")
	state := func() string {
		out, _ := l.Exec(ctx, "m1", "sh", "-c", "docker ps -a --format '{{.Names}} {{.State}}' | grep relapp")
		return strings.TrimSpace(out)
	}
	if s := state(); !strings.Contains(s, "running") {
		t.Fatalf("relapp on m1: %q", s)
	}
	fill("e", 1<<20)
	run = runDoc{}
	op.json(t, &run, "volume", "release", "rel")
	t.Logf("release run gen %d: %+v", run.Run.Gen, run.Run.Steps)
	if run.Run.State != "done" || run.Run.Steps[len(run.Run.Steps)-1].Name != "demote-writer" {
		t.Fatalf("release: %+v", run.Run)
	}
	for _, m := range []string{"m1", "m2"} {
		if v := inspect(m); v.Copy == nil || v.Copy.Role != "mirror" || !v.ReadOnly {
			t.Fatalf("%s after release: %+v read-only %v", m, v.Copy, v.ReadOnly)
		}
	}
	if a, b := sums("m1"), sums("m2"); a != b || !strings.Contains(a+"\n", "  e\n") {
		t.Fatalf("after release: m1 %q, m2 %q", a, b)
	}
	if s := state(); strings.Contains(s, "running") {
		t.Fatalf("relapp still runs after release: %q", s)
	}
	if out := op.must(t, "volume", "release", "rel"); !strings.Contains(out, "nothing to do") {
		t.Fatalf("release again: %q", out)
	}
	refused(t, "has no Writer", "volume", "sync", "rel")

	op.must(t, "volume", "restore", "rel", "--from", "m2")
	if v := inspect("m2"); v.Copy == nil || v.Copy.Role != "writer" || v.ReadOnly {
		t.Fatalf("m2 after restore: %+v read-only %v", v.Copy, v.ReadOnly)
	}
}
