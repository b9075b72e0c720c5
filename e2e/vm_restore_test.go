package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// vmVolumeRestore follows vmVolumeMove (m2 the Writer of db with the
// Service, m1 a Mirror): m2's ployzd stops, so a Machine that may hold
// the Writer does not answer; restore --from m1 is refused without
// --force and promotes m1 with it. m2 comes back as a second, older
// Writer: runs refuse naming both epochs, restore --from m1 refuses while
// m2's Container runs, and demotes m2 to a read-only Mirror once it is
// stopped.
func vmVolumeRestore(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, refused func(*testing.T, string, ...string),
	role func(string) string, serviceOn func(string) string) {
	refused(t, "m2 answers as the Writer of db", "volume", "restore", "db", "--from", "m1", "--force")
	if _, err := l.Exec(ctx, "m2", "systemctl", "stop", "ployz.service"); err != nil {
		t.Fatalf("stop ployzd on m2: %v", err)
	}
	started := false
	defer func() {
		if !started {
			l.Exec(context.Background(), "m2", "systemctl", "start", "ployz.service") // best effort for later tests
		}
	}()
	refused(t, "--force: m2 did not answer and may hold the Writer of db", "volume", "restore", "db", "--from", "m1")
	var run runDoc
	op.json(t, &run, "volume", "restore", "db", "--from", "m1", "--force")
	if run.Run.State != "done" || role("m1") != "writer" {
		t.Fatalf("restore --force: %+v, m1 %s", run.Run, role("m1"))
	}
	if _, err := l.Exec(ctx, "m2", "systemctl", "start", "ployz.service"); err != nil {
		t.Fatalf("start ployzd on m2: %v", err)
	}
	started = true
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(2 * time.Second) {
		if _, _, code := op.run(t, "volume", "inspect", "db", "--machine", "m2"); code == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("m2's ployzd did not answer again")
		}
	}
	refused(t, "has two Writers", "volume", "sync", "db")
	refused(t, "--from m1, the newer epoch, keeps its Writer and demotes m2", "volume", "restore", "db", "--from", "m2")
	refused(t, "on m2 mounts the older Writer of db: stop it first", "volume", "restore", "db", "--from", "m1")
	if on := serviceOn("m2"); on != "" {
		if out, err := l.Exec(ctx, "m2", "docker", "stop", strings.Fields(on)[0]); err != nil {
			t.Fatalf("stop the Service on m2: %v: %s", err, out)
		}
	}
	out, errs, code := op.run(t, "volume", "restore", "db", "--from", "m1")
	if code != 0 || !strings.Contains(errs, "its writes since are lost") {
		t.Fatalf("demote m2: exit %d, %s %s", code, out, errs)
	}
	if r1, r2 := role("m1"), role("m2"); r1 != "writer" || r2 != "mirror" {
		t.Fatalf("after the demotion: m1 %s, m2 %s", r1, r2)
	}
	if out, err := l.Exec(ctx, "m2", "sh", "-c", "echo byhand > /var/lib/ployz/volumes/db/byhand"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("a write by hand into m2's demoted copy: %v: %q", err, out)
	}
}
