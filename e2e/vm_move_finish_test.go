package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// vmMoveFinish follows vmVolumeRestore (m1 the Writer of db, m2 a
// Mirror with the Service's stopped Container). A Deploy with a shipped
// config file places the Service on m1 again (volume locality). A Move to
// m2 is killed (SIGKILL) right after its create step, past the point of
// no return: m2 is the Writer and holds the new Container, created but
// not started. Running the same move again finishes it: the creation key
// finds that Container (no second one), starts it, and the Service
// answers from m2 with its data and its shipped file. Then a Sync run
// m2 → m1, Machine to Machine, has its TCP connection on port 7574
// destroyed on both ends half-way; the run continues from m1's resume
// token and sends only the rest.
func vmMoveFinish(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, role func(string) string, serviceOn func(string) string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greeting.txt"), []byte("hello from the operator\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	compose := shopCompose(t, dir, "    configs: [{source: greeting, target: /etc/greeting}]\nconfigs:\n  greeting: {file: ./greeting.txt}\n")
	op.must(t, "deploy", "-f", compose, "-y")
	on1 := serviceOn("m1")
	if !strings.HasSuffix(on1, "running") || serviceOn("m2") != "" {
		t.Fatalf("deploy after the restore: m1 %q, m2 %q; want the Service on the Writer m1 alone", on1, serviceOn("m2"))
	}
	sum := func(m string) string { return volumeFileSum(ctx, t, l, m, "db", "blob") }
	before := sum("m1")

	op.killAfter(t, "  create ", "volume", "move", "db", "--to", "m2")
	if r1, r2 := role("m1"), role("m2"); r1 != "mirror" || r2 != "writer" {
		t.Fatalf("after the killed move: m1 %s, m2 %s; want it killed past the point of no return", r1, r2)
	}
	created := serviceOn("m2")
	if created == "" || strings.HasSuffix(created, "running") {
		t.Fatalf("after the killed move m2's Service Container is %q, want one created and not running", created)
	}

	// The killed CLI's lease on volume:db outlives it until it expires
	// (docs/leases.md): a rerun is refused naming it, and --wait finishes.
	if _, errs, code := op.run(t, "volume", "move", "db", "--to", "m2"); code != 4 || !strings.Contains(errs, "volume:db is held by") {
		t.Fatalf("a rerun while the killed move's lease holds: exit %d, want 4 naming the lease:\n%s", code, errs)
	}
	var run moveDoc
	op.json(t, &run, "volume", "move", "db", "--to", "m2", "--wait")
	var steps []string
	for _, st := range run.Run.Steps {
		steps = append(steps, st.Name+"/"+st.Outcome)
	}
	t.Logf("finishing run gen %d: %s", run.Run.Gen, strings.Join(steps, " "))
	if run.Run.State != "done" || !strings.Contains(strings.Join(steps, " "), "create/skipped") {
		t.Fatalf("the finishing run: %+v; want done, its create skipped (found by the creation key)", run.Run)
	}
	on2 := serviceOn("m2")
	if strings.Count(on2, "\n") != 0 || !strings.HasSuffix(on2, "running") || strings.Fields(on2)[0] != strings.Fields(created)[0] || serviceOn("m1") != "" {
		t.Fatalf("after finishing: m2 %q (the killed run created %q), m1 %q; want that one Container, running", on2, created, serviceOn("m1"))
	}
	id := strings.Fields(on2)[0]
	// The test image has no shell tools: copy the file out of the
	// Container (Exec trims the output's last newline).
	if got, err := l.Exec(ctx, "m2", "sh", "-c", "docker cp "+id+":/etc/greeting - | tar -xO"); err != nil || strings.TrimSpace(got) != "hello from the operator" {
		t.Fatalf("the shipped config file on m2: %q, %v", got, err)
	}
	if after := sum("m2"); after != before {
		t.Fatalf("blob on m2 %s, was %s on m1", after, before)
	}
	if out, errs, code := op.run(t, "volume", "move", "db", "--to", "m2"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("the move a third time: exit %d, %q %q", code, out, errs)
	}

	// Sync m2 → m1 with the direct connection destroyed half-way.
	if out, err := fillVolume(ctx, l, "m2", "db", "more", 40<<20); err != nil {
		t.Fatalf("write more on m2: %v: %s", err, out)
	}
	s := op.stream(ctx, t, "volume", "sync", "db", "--json")
	if !until(s.Stderr, "ETA", 3*time.Minute) {
		out, errs, code := s.wait()
		t.Fatalf("sync: no progress line: exit %d\n%s%s", code, out, errs)
	}
	for m, filter := range map[string]string{"m1": "sport = :7574", "m2": "dport = :7574"} {
		if out, err := l.Exec(ctx, m, "sh", "-c", "ss -K state established '( "+filter+" )'"); err != nil {
			t.Fatalf("destroy the 7574 connection on %s: %v: %s", m, err, out)
		}
	}
	out, errs, code := s.wait()
	t.Logf("sync with the connection destroyed:\n%s", errs)
	var sync runDoc
	if code != 0 || json.Unmarshal([]byte(out), &sync) != nil || sync.Run.State != "done" {
		t.Fatalf("sync: exit %d, %s", code, out)
	}
	var send string
	var sent uint64
	for _, st := range sync.Run.Steps {
		if st.Name == "send" {
			send, sent = st.Detail, st.Bytes
		}
	}
	if !strings.Contains(send, "the rest of a cut transfer") || !strings.Contains(send, "direct") || sent > 60<<20 {
		t.Fatalf("the send step: %q, %d bytes; want a direct stream cut and continued from m1's resume token, about 40 MiB in all", send, sent)
	}
	if a, b := sum("m1"), sum("m2"); a != b {
		t.Fatalf("after the cut sync: m1 %s, m2 %s", a, b)
	}
	if a, b := volumeFileSum(ctx, t, l, "m1", "db", "more"), volumeFileSum(ctx, t, l, "m2", "db", "more"); a != b {
		t.Fatalf("more after the cut sync: m1 %s, m2 %s", a, b)
	}
}
