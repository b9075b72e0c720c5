package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// moveDoc is `ployz volume move --json`.
type moveDoc struct {
	Run struct {
		Gen      uint64  `json:"gen"`
		State    string  `json:"state"`
		Error    string  `json:"error"`
		Downtime float64 `json:"downtime_seconds"`
		Steps    []struct {
			Name, Machine, Outcome, Detail, Error string
			Seconds                               float64
		} `json:"steps"`
	} `json:"run"`
}

// shopCompose writes dir/compose.yaml: the shop project's db Service on
// Provisioned Volume db, with more appended (Service keys indented by
// four spaces, then top-level keys).
func shopCompose(t *testing.T, dir, more string) string {
	f := filepath.Join(dir, "compose.yaml")
	doc := `name: shop
services:
  db:
    image: ` + lab.TestAppImage + `
    environment: {DATA_DIR: /data, SECRET_TOKEN: s3cret}
    ports: ["18080:8080"]
    volumes: ["/var/lib/ployz/volumes/db:/data"]
` + more
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// vmVolumeMove moves a stateful Service with its Provisioned Volume from
// m1 to m2 (issue 19): placed on the Writer by volume locality alone; a
// move m2 would refuse (a constraint) refused before a run opens; a move
// that fails at the cut (a Container nobody declared holds the volume)
// undone, the Service answering from m1 again; then the move under a
// write loop of one-shot POSTs: every acknowledged line is on m2's disk,
// the data set's checksums equal, the Service answers from m2, m1 holds
// a Mirror, and the downtime window is printed.
func vmVolumeMove(ctx context.Context, t *testing.T, l *lab.Lab, op *operator, refused func(*testing.T, string, ...string)) (serviceOn func(string) string) {
	op.must(t, "machine", "update", "m2", "--zfs-pool", "ployz")
	op.must(t, "machine", "update", "m1", "--label-add", "zone=a")
	op.must(t, "machine", "update", "m2", "--label-add", "zone=b")
	op.must(t, "volume", "create", "db", "--machine", "m1", "--size", "128MiB")
	if out, err := fillVolume(ctx, l, "m1", "db", "blob", 16<<20); err != nil {
		t.Fatalf("write blob: %v: %s", err, out)
	}
	compose := func(constraint string) string { return shopCompose(t, t.TempDir(), constraint) }
	m1, m2 := l.Machines[0].IP.String(), l.Machines[1].IP.String()
	client := &http.Client{Timeout: 3 * time.Second}
	appendVia := func(ip string, line int) (string, error) {
		code, body, err := oneShotURL(client, "http://"+ip+":18080/append?line="+strconv.Itoa(line), "")
		if err != nil {
			return "", err
		}
		var ans struct{ Hostname string }
		if code != http.StatusOK || json.Unmarshal([]byte(body), &ans) != nil {
			return "", fmt.Errorf("HTTP %d: %s", code, body)
		}
		return ans.Hostname, nil
	}
	serviceOn = func(m string) string {
		t.Helper()
		out, err := l.Exec(ctx, m, "sh", "-c", "docker ps -a --filter label=ployz.service=db --filter label=ployz.namespace=shop-production --format '{{.ID}} {{.State}}'")
		if err != nil {
			t.Fatalf("docker ps on %s: %v: %s", m, err, out)
		}
		return strings.TrimSpace(out)
	}
	role := func(m string) string {
		t.Helper()
		var v struct {
			Volume rpc.Volume `json:"volume"`
		}
		op.json(t, &v, "volume", "inspect", "db", "--machine", m)
		if v.Volume.Copy == nil {
			return "none"
		}
		return v.Volume.Copy.Role
	}

	// A constraint m2 fails: refused before a run opens, nothing changed.
	op.must(t, "deploy", "-f", compose("    x-placement: {constraints: [\"zone==a\"]}\n"), "-y")
	refused(t, "does not satisfy constraint zone == \"a\"", "volume", "move", "db", "--to", "m2")
	// --to the Writer with no unfinished Move there: nothing to do.
	if out, errs, code := op.run(t, "volume", "move", "db", "--to", "m1"); code != 0 || !strings.Contains(out, "m1 already is the Writer of db") {
		t.Fatalf("move to the Writer: exit %d, %q %q; want nothing to do", code, out, errs)
	}
	refused(t, "no Machine holds a volume \"nosuch\"", "volume", "move", "nosuch", "--to", "m2")
	if r := role("m1"); r != "writer" {
		t.Fatalf("after refusals m1's copy is %s", r)
	}
	var runs struct {
		Runs []struct{ Kind string } `json:"runs"`
	}
	if op.json(t, &runs, "volume", "runs", "db"); len(runs.Runs) != 0 {
		t.Fatalf("a refused move left a run: %+v", runs.Runs)
	}

	// Without the constraint, volume locality alone keeps it on m1.
	op.must(t, "deploy", "-f", compose(""), "-y")
	if on1, on2 := serviceOn("m1"), serviceOn("m2"); !strings.HasSuffix(on1, "running") || on2 != "" {
		t.Fatalf("placed by locality: m1 %q, m2 %q", on1, on2)
	}
	if _, err := appendVia(m1, 0); err != nil {
		t.Fatalf("the Service on m1: %v", err)
	}

	// A Container nobody declared mounts the volume: the Writer refuses
	// its demotion at the cut, and the run is undone.
	if out, err := l.Exec(ctx, "m1", "docker", "run", "-d", "--name", "squatter", "-v", "/var/lib/ployz/volumes/db:/x", lab.TestAppImage); err != nil {
		t.Fatalf("squatter: %v: %s", err, out)
	}
	var failed moveDoc
	out, errs, code := op.run(t, "volume", "move", "db", "--to", "m2", "--json")
	if code == 0 || json.Unmarshal([]byte(out), &failed) != nil || failed.Run.State != "undone" || !strings.Contains(failed.Run.Error, "squatter") {
		t.Fatalf("move with a squatter: exit %d, stdout %s, stderr %s; want an undone run naming squatter", code, out, errs)
	}
	t.Logf("undone move: %s", strings.TrimSpace(errs))
	// The cut's stop and the undo's start went through volume_task on m1
	// (a progress line per answer), not the plain commands.
	for _, line := range []string{"    m1: docker stop ", "    m1: docker start "} {
		if !strings.Contains(errs, line) {
			t.Fatalf("the undone move's output has no %q: the step did not run as a volume task:\n%s", line, errs)
		}
	}
	if r := role("m1"); r != "writer" {
		t.Fatalf("after the undo m1's copy is %s", r)
	}
	if on1 := serviceOn("m1"); !strings.HasSuffix(on1, "running") {
		t.Fatalf("after the undo the Service on m1 is %q", on1)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		if _, err := appendVia(m1, 1); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the Service on m1 after the undo: %v", err)
		}
	}
	if out, err := l.Exec(ctx, "m1", "docker", "rm", "-f", "squatter"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	// The move under a write loop: each line is POSTed once, to m1 and,
	// when m1 does not answer, to m2; only an answer counts as written.
	type ack struct {
		line int
		host string
		at   time.Time
	}
	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for i := 2; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			for _, ip := range []string{m1, m2} {
				if h, err := appendVia(ip, i); err == nil {
					mu.Lock()
					acks = append(acks, ack{i, h, time.Now()})
					mu.Unlock()
					break
				}
			}
		}
	}()
	time.Sleep(3 * time.Second)
	var run moveDoc
	start := time.Now()
	op.json(t, &run, "volume", "move", "db", "--to", "m2")
	total := time.Since(start)
	time.Sleep(3 * time.Second)
	close(stop)
	<-loopDone
	var steps []string
	for _, st := range run.Run.Steps {
		steps = append(steps, fmt.Sprintf("%s %s %s %.1fs", st.Name, st.Machine, st.Outcome, st.Seconds))
	}
	t.Logf("move run gen %d in %s, downtime (CLI) %.2fs: %s", run.Run.Gen, total.Round(time.Millisecond), run.Run.Downtime, strings.Join(steps, "; "))
	if run.Run.State != "done" || run.Run.Downtime <= 0 {
		t.Fatalf("move run: %+v", run.Run)
	}

	// Who answered, and the window between the last answer from m1 and
	// the first from m2.
	on2 := serviceOn("m2")
	if !strings.HasSuffix(on2, "running") || serviceOn("m1") != "" {
		t.Fatalf("after the move: m1 %q, m2 %q", serviceOn("m1"), on2)
	}
	newHost := strings.Fields(on2)[0]
	var lastOld, firstNew time.Time
	for _, a := range acks {
		switch {
		case a.host == newHost && firstNew.IsZero():
			firstNew = a.at
		case a.host != newHost && firstNew.IsZero():
			lastOld = a.at
		case a.host != newHost:
			t.Fatalf("line %d answered by %s after %s had answered", a.line, a.host, newHost)
		}
	}
	if lastOld.IsZero() || firstNew.IsZero() {
		t.Fatalf("write loop: %d answers, none from m1 or none from m2 (%s)", len(acks), newHost)
	}
	t.Logf("write loop: %d lines acknowledged; downtime window (last write acked on m1 → first on m2): %s", len(acks), firstNew.Sub(lastOld).Round(time.Millisecond))

	// Every acknowledged line is on m2's volume; the data set is equal.
	data, err := l.Exec(ctx, "m2", "cat", "/var/lib/ployz/volumes/db/appended")
	if err != nil {
		t.Fatalf("read appended on m2: %v", err)
	}
	have := map[string]bool{}
	for _, ln := range strings.Split(data, "\n") {
		have[ln] = true
	}
	for _, a := range acks {
		if !have[strconv.Itoa(a.line)] {
			t.Fatalf("line %d was acknowledged by %s but is not on m2's volume", a.line, a.host)
		}
	}
	sum := func(m string) string { return volumeFileSum(ctx, t, l, m, "db", "blob") }
	if a, b := sum("m1"), sum("m2"); a != b {
		t.Fatalf("blob: m1 %s, m2 %s", a, b)
	}
	if r1, r2 := role("m1"), role("m2"); r1 != "mirror" || r2 != "writer" {
		t.Fatalf("copies after the move: m1 %s, m2 %s", r1, r2)
	}
	if env, err := l.Exec(ctx, "m2", "sh", "-c", "docker inspect --format '{{json .Config.Env}}' "+newHost); err != nil || !strings.Contains(env, "SECRET_TOKEN=s3cret") {
		t.Fatalf("the environment did not follow: %q, %v", env, err)
	}

	// A redeploy of the unchanged compose file leaves it where the Writer is.
	op.must(t, "deploy", "-f", compose(""), "-y")
	if on := serviceOn("m2"); !strings.HasPrefix(on, newHost) || serviceOn("m1") != "" {
		t.Fatalf("after a redeploy: m1 %q, m2 %q", serviceOn("m1"), on)
	}
	// The move again: m2 is the Writer and nothing is left.
	if out, errs, code := op.run(t, "volume", "move", "db", "--to", "m2"); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("the move again: exit %d, %q %q", code, out, errs)
	}
	// m1's Mirror is read-only on disk.
	if out, err := l.Exec(ctx, "m1", "sh", "-c", "echo byhand > /var/lib/ployz/volumes/db/byhand"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Fatalf("a write by hand into m1's Mirror: %v: %q", err, out)
	}
	vmVolumeRestore(ctx, t, l, op, refused, role, serviceOn)
	vmMoveFinish(ctx, t, l, op, role, serviceOn)
	return serviceOn
}
