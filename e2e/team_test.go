package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// teammate is one operator of the demo's Cluster: an environment (its
// own HOME, operator name and SSH key) the CLI runs in.
type teammate struct {
	name string
	env  []string
}

func (tm teammate) run(t *testing.T, stdin []byte, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), args...)
	cmd.Env = tm.env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: ployz %s: %v", tm.name, strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), 0
}

func (tm teammate) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := tm.run(t, nil, args...)
	if code != 0 {
		t.Fatalf("%s: ployz %s: exit %d\n%s%s", tm.name, strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (tm teammate) history(t *testing.T, args ...string) []rpc.HistoryEntry {
	t.Helper()
	var doc struct {
		Entries []rpc.HistoryEntry `json:"entries"`
	}
	if err := json.Unmarshal([]byte(tm.must(t, append([]string{"history", "--json"}, args...)...)), &doc); err != nil {
		t.Fatalf("%s: history --json: %v", tm.name, err)
	}
	return doc.Entries
}

// teamScenario, on the demo's Cluster: a teammate B with a HOME, an
// operator name and an SSH key of her own (authorized on every Machine)
// imports A's exported context; she sees A's history, scales web, and A
// sees her scale under her name and key. B's CLI killed mid-scale leaves
// the namespace's lease: A's scale is refused naming B (exit 4) until it
// expires, and with --wait runs once it has. Then, under keep-alive load
// through every Machine's ingress, B deploys another message on web,
// restarts api and rolls back to revision 1 with no failed request; a
// rollback to an unknown revision is refused naming it, with nothing
// recorded; B removes the project, and A sees each of B's operations,
// completed, under B's name.
func teamScenario(t *testing.T, l *lab.Lab, envA []string, keyFileA, name string) {
	t.Helper()
	homeB := t.TempDir()
	keyB := filepath.Join(homeB, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bob@e2e", "-f", keyB).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(keyB + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	// Every lab Machine's root authorized_keys is this file, bind-mounted.
	f, err := os.OpenFile(keyFileA+".pub", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(append([]byte("\n"), pub...))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	fp, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", keyB+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	fpB := strings.Fields(string(fp))[1]

	a := teammate{name: "alice", env: append(append([]string{}, envA...), "PLOYZ_OPERATOR=alice")}
	b := teammate{name: "bob", env: append(demoEnv(homeB, name), "PLOYZ_OPERATOR=bob", "PLOYZ_SSH_KEY="+keyB)}
	doc := a.must(t, "ctx", "export", name)
	if out, errs, code := b.run(t, []byte(doc), "ctx", "import", "--use"); code != 0 {
		t.Fatalf("bob: ctx import: exit %d\n%s%s", code, out, errs)
	}

	// B sees what A did before she had a context.
	seen := b.history(t, "-p", "hello")
	if len(seen) == 0 || seen[len(seen)-1].Operator.Name == "bob" {
		t.Fatalf("bob's history of hello: %+v, want the demo operator's deploys", seen)
	}
	b.must(t, "scale", "web", "1", "-p", "hello", "-y") // the example runs 2, one per Machine
	scales := a.history(t, "--context", name, "--kind", "scale", "-p", "hello")
	if len(scales) == 0 || scales[0].Operator.Name != "bob" || scales[0].Operator.KeyFingerprint != fpB || scales[0].Outcome != rpc.OutcomeCompleted {
		t.Fatalf("alice's view of the scales: %+v, want bob's (%s) completed first", scales, fpB)
	}

	// B's CLI dies holding the namespace's lease.
	killed := exec.Command(filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), "scale", "web", "2", "-p", "hello", "-y")
	killed.Env = b.env
	killAt(t, killed, "move_serving_pointer")
	killedAt := time.Now()
	out, errs, code := a.run(t, nil, "--context", name, "scale", "web", "2", "-p", "hello", "-y")
	if code != 4 || !strings.Contains(errs, "bob") {
		t.Fatalf("alice's scale while bob's lease is live: exit %d, stderr %q, stdout %q; want exit 4 naming bob", code, errs, out)
	}
	out, errs, code = a.run(t, nil, "--context", name, "--wait", "scale", "web", "2", "-p", "hello", "-y")
	if code != 0 || !strings.Contains(errs, "waiting") {
		t.Fatalf("alice's scale --wait: exit %d, stderr %q, stdout %q; want it to wait for bob's lease, then run", code, errs, out)
	}
	t.Logf("alice's scale --wait ran %s after bob's CLI was killed", time.Since(killedAt).Round(time.Second))
	if h := b.history(t, "--kind", "scale", "-p", "hello", "--limit", "1"); len(h) != 1 || h[0].Operator.Name != "alice" {
		t.Fatalf("bob's view of the last scale: %+v, want alice's", h)
	}
	start := time.Now()
	bobChanges(t, l, a, b, fpB, name)
	t.Logf("bob's changes under load passed in %s", time.Since(start).Round(time.Second))
}

// bobChanges: B deploys, restarts and rolls back under load through
// every ingress (no request may fail), is refused an unknown revision
// with nothing recorded, then removes the project; A's history shows
// each operation as B's, completed.
func bobChanges(t *testing.T, l *lab.Lab, a, b teammate, fpB, name string) {
	t.Helper()
	loop := startLoop(l, "hello.example.test")
	b.must(t, "deploy", "-f", helloWith(t, "hello from web", "hello from bob"), "-y")
	webSays(t, l, "hello from bob")
	b.must(t, "service", "restart", "api", "-p", "hello", "-y")
	b.must(t, "rollback", "-p", "hello", "--to", "1", "-y")
	webSays(t, l, "hello from web")
	loop.end(t, "bob's deploy, restart of api and rollback to revision 1")

	newest := b.history(t, "-p", "hello", "--limit", "1")
	out, errs, code := b.run(t, nil, "rollback", "-p", "hello", "--to", "999", "-y")
	if code == 0 || !strings.Contains(errs, "revision 999") {
		t.Fatalf("rollback to an unknown revision: exit %d, stderr %q, stdout %q; want refused naming revision 999", code, errs, out)
	}
	if h := b.history(t, "-p", "hello", "--limit", "1"); len(h) != 1 || len(newest) != 1 || h[0].ID != newest[0].ID {
		t.Fatalf("the refused rollback recorded an operation: newest before %+v, after %+v", newest, h)
	}

	b.must(t, "project", "rm", "hello", "-y")
	seen := a.history(t, "--context", name, "-p", "hello", "--limit", "4")
	var kinds []string
	for _, e := range seen {
		kinds = append(kinds, e.Kind)
		if e.Operator.Name != "bob" || e.Operator.KeyFingerprint != fpB || e.Outcome != rpc.OutcomeCompleted {
			t.Errorf("alice's view of bob's %s: %+v, want bob's (%s), completed", e.Kind, e, fpB)
		}
	}
	want := []string{rpc.HistoryRemove, rpc.HistoryRollback, rpc.HistoryRestart, rpc.HistoryDeploy}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("alice's newest history of hello: %v, want %v (bob's, newest first)", kinds, want)
	}
	if seen[1].Revision == 0 || !strings.Contains(seen[1].Detail, "rollback to revision 1") {
		t.Errorf("alice's view of bob's rollback: %+v, want its revision and \"rollback to revision 1\"", seen[1])
	}
}

// killAt starts cmd and kills it (SIGKILL, no clean-up) once its stderr
// shows marker; it fails t if the marker never comes.
func killAt(t *testing.T, cmd *exec.Cmd, marker string) {
	t.Helper()
	errs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var seen []byte
	for {
		n, err := errs.Read(buf)
		seen = append(seen, buf[:n]...)
		if bytes.Contains(seen, []byte(marker)) {
			cmd.Process.Kill() // it may have just exited
			cmd.Wait()         // killed on purpose
			return
		}
		if err != nil {
			cmd.Wait() // reported below
			t.Fatalf("ployz %s ended without %q:\n%s", strings.Join(cmd.Args[1:], " "), marker, seen)
		}
	}
}
