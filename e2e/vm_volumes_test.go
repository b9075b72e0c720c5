package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// TestVMVolumes provisions ZFS volumes on the VM lab (issue 19, first
// layer): m1 with --zfs-pool ployz, m2 without, then given the pool by
// `machine update`; a volume created on m1, data written by a Container
// bind-mounting it, a snapshot sent m1 → m2 through the operator
// (`ployz volume send | ployz volume receive`, Machine RPC streams) and
// Machine to Machine (`ployz volume send --to`, the volume transport on
// port 7574), checksums equal, then removed; and the bad-input cases,
// each changing nothing. The Move, Restore and finished Move run in
// TestVMLab (volume-move), on the lab make test's VM step boots anyway.
func TestVMVolumes(t *testing.T) {
	needVMLab(t)
	l := lab.ForTestVM(t, 2)
	op := newVMOperator(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	var in rpc.Inspection
	op.json(t, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1", "--zfs-pool", "ployz")
	op.json(t, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")

	refused := refuser(op)
	lsOf := func(t *testing.T) map[string]rpc.VolumeList {
		var ls struct {
			Machines []machineVolumesJSON `json:"machines"`
		}
		op.json(t, &ls, "volume", "ls")
		out := map[string]rpc.VolumeList{}
		for _, m := range ls.Machines {
			if m.Error != "" {
				t.Fatalf("volume ls: %s did not answer: %s", m.Machine, m.Error)
			}
			out[m.Machine] = *m.List
		}
		return out
	}

	t.Run("bad-input", func(t *testing.T) {
		refused(t, "has no ZFS pool", "volume", "create", "db", "--machine", "m2", "--size", "64MiB")
		refused(t, "--size", "volume", "create", "db", "--machine", "m1", "--size", "lots")
		refused(t, "--size", "volume", "create", "db", "--machine", "m1", "--size", "1KiB")
		refused(t, "NAME", "volume", "create", "Bad/Name", "--machine", "m1", "--size", "64MiB")
		refused(t, "ployz.zfs.pool", "machine", "update", "m2", "--zfs-pool", "nosuchpool")
		refused(t, "--zfs-pool", "machine", "update", "m2", "--zfs-pool", "a/b")
		refused(t, "name", "volume", "inspect", "nosuch")
		ls := lsOf(t)
		if len(ls["m1"].Volumes) != 0 || ls["m1"].Pool != "ployz" || ls["m2"].Pool != "" {
			t.Fatalf("after refusals: %+v", ls)
		}
		var m2 rpc.Inspection
		op.json(t, &m2, "machine", "inspect", "m2")
		if _, ok := m2.Labels["ployz.zfs.pool"]; ok {
			t.Fatalf("a refused --zfs-pool was kept: %v", m2.Labels)
		}
	})

	var sum1 string
	t.Run("create-write-snapshot", func(t *testing.T) {
		var v struct {
			Volume rpc.Volume `json:"volume"`
		}
		op.json(t, &v, "volume", "create", "db", "--machine", "m1", "--size", "64MiB")
		if v.Volume.Dataset != "ployz/ployz/volumes/db" || v.Volume.SizeBytes != 64<<20 || v.Volume.Mountpoint != "/var/lib/ployz/volumes/db" {
			t.Fatalf("created %+v", v.Volume)
		}
		if q, err := l.Exec(ctx, "m1", "zfs", "get", "-Hp", "-o", "value", "quota", "ployz/ployz/volumes/db"); err != nil || q != "67108864" {
			t.Fatalf("quota on m1: %q, %v", q, err)
		}
		refused(t, "already exists", "volume", "create", "db", "--machine", "m1", "--size", "128MiB")
		// A Container writes a known data set through a bind mount.
		for file, size := range map[string]int{"blob": 16 << 20, "small": 1000} {
			if out, err := fillVolume(ctx, l, "m1", "db", file, size); err != nil {
				t.Fatalf("write through the bind mount: %v: %s", err, out)
			}
		}
		var err error
		sum1, err = l.Exec(ctx, "m1", "sh", "-c", "cd /var/lib/ployz/volumes/db && sha256sum blob small")
		if err != nil {
			t.Fatal(err)
		}
		op.json(t, &v, "volume", "snapshot", "db", "s1")
		if len(v.Volume.Snapshots) != 1 || v.Volume.Snapshots[0].Name != "s1" || v.Volume.UsedBytes < 16<<20 {
			t.Fatalf("after snapshot: %+v", v.Volume)
		}
		// Over-quota writes fail in the Container, as the quota says.
		if out, err := fillVolume(ctx, l, "m1", "db", "big", 64<<20); err == nil {
			t.Fatalf("a 64MiB write into a 64MiB volume holding 16MiB succeeded: %s", out)
		}
		if out, err := l.Exec(ctx, "m1", "rm", "-f", "/var/lib/ployz/volumes/db/big"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("send-m1-to-m2", func(t *testing.T) {
		op.json(t, &in, "machine", "update", "m2", "--zfs-pool", "ployz")
		file := filepath.Join(t.TempDir(), "db-s1.zfs")
		start := time.Now()
		sh(t, op, "volume send db --snapshot s1 > "+file)
		fi, err := os.Stat(file)
		if err != nil || fi.Size() < 16<<20 {
			t.Fatalf("stream file: %v, %v", fi, err)
		}
		sh(t, op, "volume receive db --machine m2 --resumable --json < "+file)
		t.Logf("sent %d bytes m1 → operator → m2 in %s", fi.Size(), time.Since(start).Round(time.Millisecond))
		sum2, err := l.Exec(ctx, "m2", "sh", "-c", "cd /var/lib/ployz/volumes/db && sha256sum blob small")
		if err != nil || sum2 != sum1 {
			t.Fatalf("checksums differ: m1 %q, m2 %q (%v)", sum1, sum2, err)
		}
		// Same point in time on both: equal snapshot GUIDs.
		var v1, v2 struct {
			Volume rpc.Volume `json:"volume"`
		}
		op.json(t, &v1, "volume", "inspect", "db", "--machine", "m1")
		op.json(t, &v2, "volume", "inspect", "db", "--machine", "m2")
		if v1.Volume.Snapshots[0].GUID == "" || v1.Volume.Snapshots[0].GUID != v2.Volume.Snapshots[0].GUID || v2.Volume.SizeBytes != 64<<20 {
			t.Fatalf("m1 %+v, m2 %+v", v1.Volume, v2.Volume)
		}
		// Now db is on two Machines: a name alone is ambiguous.
		refused(t, "--machine", "volume", "inspect", "db")
		// Incremental: more data on m1, s2, send --from s1.
		if out, err := l.Exec(ctx, "m1", "sh", "-c", "echo more > /var/lib/ployz/volumes/db/more && sync"); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		op.must(t, "volume", "snapshot", "db", "s2", "--machine", "m1")
		sh(t, op, "volume send db --machine m1 --snapshot s2 --from s1 | "+ployzCmd(op)+" volume receive db --machine m2")
		if out, err := l.Exec(ctx, "m2", "cat", "/var/lib/ployz/volumes/db/more"); err != nil || out != "more" {
			t.Fatalf("incremental on m2: %q, %v", out, err)
		}
		// A full stream into a volume that exists there is refused, and
		// the volume keeps its data.
		file = filepath.Join(t.TempDir(), "db-s1-again.zfs")
		sh(t, op, "volume send db --machine m1 --snapshot s1 > "+file)
		if out, err := exec.Command("sh", "-c", ployzCmd(op)+" volume receive db --machine m2 < "+file).CombinedOutput(); err == nil {
			t.Fatalf("a full stream into m2's existing db was accepted: %s", out)
		} else {
			t.Logf("refused as expected: %s", strings.TrimSpace(string(out)))
		}
		if out, err := l.Exec(ctx, "m2", "cat", "/var/lib/ployz/volumes/db/more"); err != nil || out != "more" {
			t.Fatalf("m2's db after the refused receive: %q, %v", out, err)
		}
	})

	t.Run("resume-cut-transfer", func(t *testing.T) {
		// Half a full stream into db2 on m2 (a cut transfer), then the
		// rest from the resume token m2 keeps: the same data, not restarted.
		file := filepath.Join(t.TempDir(), "db-s2.zfs")
		sh(t, op, "volume send db --machine m1 --snapshot s2 > "+file)
		fi, half, token := cutReceive(t, op, file, "db2", "m2")
		rest := filepath.Join(t.TempDir(), "rest.zfs")
		sh(t, op, "volume send db --machine m1 --resume-token "+token+" > "+rest)
		ri, err := os.Stat(rest)
		if err != nil || ri.Size() >= fi.Size() {
			t.Fatalf("the resumed stream is %v bytes of %d (%v): restarted, not resumed", ri.Size(), fi.Size(), err)
		}
		sh(t, op, "volume receive db2 --machine m2 --resumable < "+rest)
		t.Logf("cut after %d of %d bytes; resumed with %d", half, fi.Size(), ri.Size())
		sum, err := l.Exec(ctx, "m2", "sh", "-c", "cd /var/lib/ployz/volumes/db2 && sha256sum blob small")
		if err != nil || sum != sum1 {
			t.Fatalf("db2 on m2 after resume: %q (%v), want %q", sum, err, sum1)
		}
		op.must(t, "volume", "rm", "db2", "--machine", "m2")
	})

	t.Run("direct-send", func(t *testing.T) { vmDirectSend(ctx, t, l, op) })

	t.Run("rm", func(t *testing.T) {
		op.must(t, "volume", "rm", "db", "--machine", "m2")
		op.must(t, "volume", "rm", "db", "--json")
		ls := lsOf(t)
		if len(ls["m1"].Volumes) != 0 || len(ls["m2"].Volumes) != 0 {
			t.Fatalf("after rm: %+v", ls)
		}
		for _, m := range []string{"m1", "m2"} {
			if out, err := l.Exec(ctx, m, "zfs", "list", "-H", "ployz/ployz/volumes/db"); err == nil {
				t.Fatalf("%s still holds the dataset: %s", m, out)
			}
		}
		refused(t, "name", "volume", "rm", "db")
	})

	t.Run("volume-runs", func(t *testing.T) { vmVolumeRuns(ctx, t, l, op, refused) })
	t.Run("compose-volume", func(t *testing.T) { vmComposeVolume(ctx, t, l, op, refused) })
	t.Run("volume-prune-release", func(t *testing.T) { vmPruneRelease(ctx, t, l, op, refused) })
}

// refuser answers a check that `ployz ARGS` exits non-zero with want in
// its stderr.
func refuser(op *operator) func(t *testing.T, want string, args ...string) {
	return func(t *testing.T, want string, args ...string) {
		t.Helper()
		out, errs, code := op.run(t, args...)
		if code == 0 || !strings.Contains(errs, want) {
			t.Fatalf("ployz %s: exit %d, stderr %q, stdout %q; want a refusal naming %q", strings.Join(args, " "), code, errs, out, want)
		}
	}
}

// runDoc is `ployz volume mirror|sync --json`.
type runDoc struct {
	Run struct {
		Gen   uint64 `json:"gen"`
		State string `json:"state"`
		Steps []struct {
			Name, Machine, Outcome, Detail string
			Bytes                          uint64
		} `json:"steps"`
	} `json:"run"`
}

// vmVolumeRuns: a volume created on m1 is its Writer; a Mirror run gives
// m2 a Mirror (full send), a Sync run after more writes brings it level
// (incremental), checksums equal; a late set_volume_copy from the older
// run is refused by m2's floor; a Container mounting the volume is
// admitted on m1 (the Writer) and refused on m2 (the Mirror).
func vmVolumeRuns(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, refused func(*testing.T, string, ...string)) {
	// m2 has its pool from send-m1-to-m2; set it again so this subtest
	// also runs alone (-run TestVMVolumes/volume-runs).
	op.must(t, "machine", "update", "m2", "--zfs-pool", "ployz")
	var v struct {
		Volume rpc.Volume `json:"volume"`
	}
	op.json(t, &v, "volume", "create", "app", "--machine", "m1", "--size", "128MiB")
	if v.Volume.Copy == nil || v.Volume.Copy.Role != "writer" || v.Volume.Copy.Epoch == 0 {
		t.Fatalf("a created volume is not its Writer: %+v", v.Volume.Copy)
	}
	sums := func(m string) string {
		t.Helper()
		out, err := l.Exec(ctx, m, "sh", "-c", "cd /var/lib/ployz/volumes/app && sha256sum $(ls | sort)")
		if err != nil {
			t.Fatalf("checksums on %s: %v: %s", m, err, out)
		}
		return out
	}
	fill := func(file string, size int) {
		t.Helper()
		if out, err := fillVolume(ctx, l, "m1", "app", file, size); err != nil {
			t.Fatalf("write %s: %v: %s", file, err, out)
		}
	}
	fill("blob", 32<<20)
	fill("small", 1000)
	refused(t, "--to", "volume", "mirror", "app", "--to", "m1")
	refused(t, "--to", "volume", "mirror", "app", "--to", "nosuch")
	refused(t, "no Mirror", "volume", "sync", "app")

	var run runDoc
	start := time.Now()
	op.json(t, &run, "volume", "mirror", "app", "--to", "m2")
	t.Logf("mirror run gen %d in %s: %+v", run.Run.Gen, time.Since(start).Round(time.Millisecond), run.Run.Steps)
	sent := func(run runDoc, detail string) uint64 {
		for _, s := range run.Run.Steps {
			if s.Name == "send" && s.Outcome == "done" && strings.Contains(s.Detail, detail) {
				return s.Bytes
			}
		}
		t.Fatalf("no done send step %q: %+v", detail, run.Run.Steps)
		return 0
	}
	if run.Run.State != "done" || sent(run, "full run-") < 32<<20 || sent(run, " direct") == 0 {
		t.Fatalf("mirror run (the send step Machine to Machine): %+v", run.Run)
	}
	if a, b := sums("m1"), sums("m2"); a != b {
		t.Fatalf("after mirror: m1 %q, m2 %q", a, b)
	}
	var v2 struct {
		Volume rpc.Volume `json:"volume"`
	}
	op.json(t, &v2, "volume", "inspect", "app", "--machine", "m2")
	if v2.Volume.Copy == nil || v2.Volume.Copy.Role != "mirror" || v2.Volume.Copy.Floor != run.Run.Gen {
		t.Fatalf("m2's copy after mirror: %+v", v2.Volume.Copy)
	}
	refused(t, "already holds app as its mirror", "volume", "mirror", "app", "--to", "m2")

	// The Mirror is read-only on disk, the Writer writable; a stream into
	// the Writer is refused. The Sync below receives into the read-only
	// Mirror.
	var v1 struct {
		Volume rpc.Volume `json:"volume"`
	}
	op.json(t, &v1, "volume", "inspect", "app", "--machine", "m1")
	if !v2.Volume.ReadOnly || v1.Volume.ReadOnly {
		t.Fatalf("readonly: m1 (writer) %v, m2 (mirror) %v", v1.Volume.ReadOnly, v2.Volume.ReadOnly)
	}
	if out, err := l.Exec(ctx, "m2", "sh", "-c", "echo byhand > /var/lib/ployz/volumes/app/byhand"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("a write by hand into m2's Mirror: %v: %q; want Read-only file system", err, out)
	}
	if out, err := exec.Command("sh", "-c", ployzCmd(op)+" volume send app --snapshot run-1 --machine m2 | "+ployzCmd(op)+" volume receive app --machine m1").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "is the Writer") {
		t.Fatalf("a receive into the Writer: %v: %s", err, out)
	} else {
		t.Logf("receive into the Writer refused: %s", strings.TrimSpace(string(out)))
	}

	// More writes on the Writer, then a Sync: only the change travels.
	fill("more", 4<<20)
	if out, err := l.Exec(ctx, "m1", "sh", "-c", "echo edited >> /var/lib/ployz/volumes/app/small && sync"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	start = time.Now()
	op.json(t, &run, "volume", "sync", "app")
	t.Logf("sync run gen %d in %s: %+v", run.Run.Gen, time.Since(start).Round(time.Millisecond), run.Run.Steps)
	if n := sent(run, "incremental run-1 → run-2"); run.Run.State != "done" || run.Run.Gen != 2 || n < 4<<20 || n > 16<<20 {
		t.Fatalf("sync run (sent %d): %+v", n, run.Run)
	}
	a, b := sums("m1"), sums("m2")
	if a != b || !strings.Contains(a, "more") {
		t.Fatalf("after sync: m1 %q, m2 %q", a, b)
	}
	t.Logf("checksums equal:\n%s", a)

	// A late request from the older run (gen 1) is refused by m2's floor
	// (raised to 2 by the Sync), naming the field; m2 stays a Mirror.
	refused(t, "gen: 1 is below this copy's floor 2", "volume", "set-copy", "app", "--machine", "m2", "--gen", "1", "--expect", "mirror", "--want", "writer")
	refused(t, "expect: ", "volume", "set-copy", "app", "--machine", "m2", "--gen", "2", "--expect", "none", "--want", "writer")
	op.json(t, &v2, "volume", "inspect", "app", "--machine", "m2")
	if v2.Volume.Copy.Role != "mirror" {
		t.Fatalf("m2's copy after refusals: %+v", v2.Volume.Copy)
	}
	// A replay of the Sync's own check answers success, unchanged.
	var set struct {
		Set rpc.VolumeCopySet `json:"set"`
	}
	op.json(t, &set, "volume", "set-copy", "app", "--machine", "m2", "--gen", "2", "--expect", "mirror", "--want", "mirror")
	if set.Set.Changed || set.Set.Copy.Role != "mirror" {
		t.Fatalf("replay: %+v", set.Set)
	}
	var runs struct {
		Runs []struct {
			Gen   uint64 `json:"gen"`
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"runs"`
	}
	op.json(t, &runs, "volume", "runs", "app")
	if len(runs.Runs) != 2 || runs.Runs[0].Kind != "sync" || runs.Runs[1].Kind != "mirror" || runs.Runs[0].State != "done" {
		t.Fatalf("runs: %+v", runs.Runs)
	}

	// Delete-mirror: refused for the Writer; m2's Mirror and its dataset
	// go, the Writer untouched. A new Mirror run gives m2 one again.
	refused(t, "--on: m1 holds the Writer of app", "volume", "delete-mirror", "app", "--on", "m1")
	op.json(t, &run, "volume", "delete-mirror", "app", "--on", "m2")
	if run.Run.State != "done" || len(run.Run.Steps) != 3 {
		t.Fatalf("delete-mirror run: %+v", run.Run)
	}
	if out, err := l.Exec(ctx, "m2", "zfs", "list", "-H", "ployz/ployz/volumes/app"); err == nil {
		t.Fatalf("m2 still holds app's dataset: %s", out)
	}
	if a := sums("m1"); !strings.Contains(a, "more") {
		t.Fatalf("the Writer changed: %q", a)
	}
	op.json(t, &run, "volume", "mirror", "app", "--to", "m2")
	if run.Run.State != "done" {
		t.Fatalf("mirror again: %+v", run.Run)
	}

	// Volume locality: a Container mounting the volume is placed on the
	// Writer's Machine; constrained to the Mirror's, the deploy refuses
	// it before any Machine is asked (the Mirror's admission would too).
	op.must(t, "machine", "update", "m1", "--label-add", "zone=a")
	op.must(t, "machine", "update", "m2", "--label-add", "zone=b")
	compose := func(project, zone string) string {
		f := filepath.Join(t.TempDir(), "compose.yaml")
		doc := "name: " + project + `
services:
  app:
    image: ` + lab.TestAppImage + `
    volumes: ["/var/lib/ployz/volumes/app:/data"]
    x-placement: {constraints: ["zone==` + zone + `"]}
`
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	op.must(t, "deploy", "-f", compose("onwriter", "a"), "-y")
	if out, err := l.Exec(ctx, "m1", "sh", "-c", "docker ps --no-trunc --format '{{.Names}} {{.Mounts}}' | grep onwriter"); err != nil || !strings.Contains(out, "/var/lib/ployz/volumes/app") {
		t.Fatalf("the Writer's Container on m1: %q, %v", out, err)
	}
	if out, errs, code := op.run(t, "deploy", "-f", compose("onmirror", "b"), "-y"); code == 0 || !strings.Contains(out+errs, "Provisioned Volume app has its Writer on m1, which the placement excludes") {
		t.Fatalf("deploy onto the Mirror's Machine: exit %d, stdout %q, stderr %q; want a refusal naming the copy", code, out, errs)
	} else {
		t.Logf("refused on m2 as expected: %s", strings.TrimSpace(errs))
	}
	if out, _ := l.Exec(ctx, "m2", "sh", "-c", "docker ps -a --format '{{.Names}}' | grep onmirror || true"); out != "" {
		t.Fatalf("a Container was created on the Mirror's Machine: %q", out)
	}
}

// vmDirectSend: `ployz volume send --to` goes Machine to Machine: the
// rest of a cut transfer from m2's resume token (cut by feeding m2 half
// a stream through the operator), then an incremental; the data arrives
// whole and only the rest travels.
func vmDirectSend(ctx context.Context, t *testing.T, l *lab.Lab, op *operator) {
	op.must(t, "machine", "update", "m2", "--zfs-pool", "ployz")
	op.must(t, "volume", "create", "db3", "--machine", "m1", "--size", "64MiB")
	if out, err := fillVolume(ctx, l, "m1", "db3", "blob", 24<<20); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	op.must(t, "volume", "snapshot", "db3", "s1")
	file := filepath.Join(t.TempDir(), "db3-s1.zfs")
	sh(t, op, "volume send db3 --snapshot s1 > "+file)
	fi, half, token := cutReceive(t, op, file, "db3", "m2")
	type sent struct {
		Bytes  int64      `json:"bytes"`
		Direct bool       `json:"direct"`
		Volume rpc.Volume `json:"volume"`
	}
	var rest sent
	start := time.Now()
	op.json(t, &rest, "volume", "send", "db3", "--machine", "m1", "--resume-token", token, "--to", "m2")
	if !rest.Direct || rest.Bytes <= 0 || rest.Bytes >= fi.Size() || rest.Volume.ResumeToken != "" {
		t.Fatalf("the direct resume sent %d of %d bytes (direct %v): %+v", rest.Bytes, fi.Size(), rest.Direct, rest.Volume)
	}
	t.Logf("cut after %d of %d bytes; resumed Machine to Machine with %d in %s", half, fi.Size(), rest.Bytes, time.Since(start).Round(time.Millisecond))
	sum := func(m string) string {
		out, err := l.Exec(ctx, m, "sh", "-c", "cd /var/lib/ployz/volumes/db3 && sha256sum $(ls | sort)")
		if err != nil {
			t.Fatalf("checksums on %s: %v: %s", m, err, out)
		}
		return out
	}
	if a, b := sum("m1"), sum("m2"); a != b {
		t.Fatalf("after the direct resume: m1 %q, m2 %q", a, b)
	}
	// An incremental, Machine to Machine, with progress on stderr.
	if out, err := fillVolume(ctx, l, "m1", "db3", "more", 8<<20); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	op.must(t, "volume", "snapshot", "db3", "s2", "--machine", "m1")
	var inc sent
	start = time.Now()
	op.json(t, &inc, "volume", "send", "db3", "--machine", "m1", "--snapshot", "s2", "--from", "s1", "--to", "m2")
	if !inc.Direct || inc.Bytes < 8<<20 || inc.Bytes > 16<<20 {
		t.Fatalf("the direct incremental: %+v", inc)
	}
	t.Logf("incremental s1 → s2, %d bytes Machine to Machine in %s", inc.Bytes, time.Since(start).Round(time.Millisecond))
	if a, b := sum("m1"), sum("m2"); a != b || !strings.Contains(a, "more") {
		t.Fatalf("after the direct incremental: m1 %q, m2 %q", a, b)
	}
	op.must(t, "volume", "rm", "db3", "--machine", "m2")
	op.must(t, "volume", "rm", "db3", "--machine", "m1")
}

// cutReceive feeds half the stream in file into volume vol on machine,
// resumable (a cut transfer), and answers the file's size, the half and
// the resume token the Machine keeps.
func cutReceive(t *testing.T, op *operator, file, vol, machine string) (os.FileInfo, int64, string) {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	half := fi.Size() / 2
	if out, err := exec.Command("sh", "-c", "head -c "+strconv.FormatInt(half, 10)+" "+file+" | "+ployzCmd(op)+" volume receive "+vol+" --machine "+machine+" --resumable").CombinedOutput(); err == nil {
		t.Fatalf("half a stream was accepted: %s", out)
	}
	var v struct {
		Volume rpc.Volume `json:"volume"`
	}
	op.json(t, &v, "volume", "inspect", vol, "--machine", machine)
	if v.Volume.ResumeToken == "" {
		t.Fatalf("no resume token after a cut transfer: %+v", v.Volume)
	}
	return fi, half, v.Volume.ResumeToken
}

// machineVolumesJSON is one row of `ployz volume ls --json`.
type machineVolumesJSON struct {
	Machine string          `json:"machine"`
	List    *rpc.VolumeList `json:"list"`
	Error   string          `json:"error"`
}

// ployzCmd is the CLI's command line for a shell pipeline.
func ployzCmd(op *operator) string {
	return strings.Join(append(op.env, "PLOYZ_OPERATOR_STORE="+op.store), " ") + " " + filepath.Join(os.Getenv(lab.EnvBinDir), "ployz") + " --ssh-key " + op.key
}

// sh runs `ployz ARGS` (with shell redirections and pipes) and fails the
// test on a non-zero exit.
func sh(t *testing.T, op *operator, args string) {
	t.Helper()
	out, err := exec.Command("sh", "-c", ployzCmd(op)+" "+args).CombinedOutput()
	if err != nil {
		t.Fatalf("ployz %s: %v: %s", args, err, out)
	}
	t.Logf("ployz %s: %s", args, strings.TrimSpace(string(out)))
}

// volumeFileSum is the sha256 of file in volume vol's mountpoint on
// machine m.
func volumeFileSum(ctx context.Context, t *testing.T, l *lab.Lab, m, vol, file string) string {
	t.Helper()
	out, err := l.Exec(ctx, m, "sha256sum", "/var/lib/ployz/volumes/"+vol+"/"+file)
	if err != nil {
		t.Fatalf("checksum of %s/%s on %s: %v: %s", vol, file, m, err, out)
	}
	return strings.Fields(out)[0]
}

// fillVolume writes n pseudo-random bytes to file in Provisioned Volume
// vol on Machine m, through a Container bind-mounting it as a Service
// would.
func fillVolume(ctx context.Context, l *lab.Lab, m, vol, file string, n int) (string, error) {
	return l.Exec(ctx, m, "docker", "run", "--rm", "-v", "/var/lib/ployz/volumes/"+vol+":/data", "--entrypoint", "/testapp", lab.TestAppImage,
		"fill", "/data/"+file, strconv.Itoa(n))
}
