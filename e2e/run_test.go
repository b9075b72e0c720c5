package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// runCompose is a Service with environment, a shipped config and a
// Docker volume, so a one-off run shows it gets all three. Its image is
// this build's testapp by its content tag (lab.TestAppRef): the one-shot
// mode must be there, and the host's ployz-testapp:latest, which a
// deploy delivers, is whichever checkout imported last.
const runCompose = `name: jobs
services:
  web:
    image: %s
    environment: {MESSAGE: "from-web-env"}
    configs: [{source: greeting, target: /greeting.txt}]
    volumes: ["data:/data"]
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 1}
configs:
  greeting: {content: "greeting-from-config"}
volumes:
  data:
`

// detachedDoc is `ployz run --detach --json`.
type detachedDoc struct {
	Container string `json:"container"`
	ID        string `json:"id"`
	Machine   string `json:"machine"`
	Logs      string `json:"logs"`
}

// TestRun: `ployz run` makes one-off Containers of a deployed Service
// (issue 50 item 1): the command's exit code is the CLI's, with the
// Service's environment, shipped config and volume; its output is in
// `ployz logs` the moment it returns, and its Container is gone; a
// detached run is listed by ps as a run (never a replica, never ready),
// followed with logs -f and collected once it ended; --keep keeps it;
// Ctrl-C reaches the process; a --machine without the Service's volume
// and an unknown Service are refused. A step beside it redeploys a
// socket-activated Service under a connect loop (issue 46 item 5).
func TestRun(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	formCluster(t, l, op)
	ctx := context.Background()
	if doc, errs, code := deployFile(t, op, fmt.Sprintf(runCompose, lab.TestAppRef())); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	p := ps(t, op, "jobs")
	if len(p.Containers) != 1 {
		t.Fatalf("%d Containers, want web's 1", len(p.Containers))
	}
	home := p.Containers[0].Machine
	other := l.Machines[0].Name
	if other == home {
		other = l.Machines[1].Name
	}
	runs := func(m string) string {
		out, err := l.Exec(ctx, m, "docker", "ps", "-a", "--filter", "label="+rpc.LabelKind+"="+rpc.KindRun, "--format", "{{.Names}} {{.Status}}")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	t.Run("exit-code-and-logs", func(t *testing.T) {
		marker := fmt.Sprintf("run-marker-%d", time.Now().UnixNano())
		out, errs, code := op.run(t, "run", "web", "-p", "jobs", "--", "/testapp", "--exit-code", "3", "--say", marker, "--show", "/greeting.txt")
		if code != 3 {
			t.Fatalf("ployz run: exit %d, want 3\n%s\n%s", code, out, errs)
		}
		for _, want := range []string{"MESSAGE=from-web-env", marker, "greeting-from-config"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errs, "testapp run: exit 3") {
			t.Errorf("stderr lacks the process's own stderr:\n%s", errs)
		}
		// No waiting: the run was removed only once the Log Store held
		// its last line.
		var doc logsDoc
		op.json(t, &doc, "logs", "web", "-p", "jobs", "--since", "10m", "--grep", marker)
		if len(doc.Lines) != 1 || doc.Lines[0].Machine != home || !strings.HasPrefix(doc.Lines[0].ContainerName, "jobs-production-web-run-") {
			t.Errorf("ployz logs of the run right after it returned: %+v (failed %+v)", doc.Lines, doc.Failed)
		}
		if left := runs(home); left != "" {
			t.Errorf("the run's Container is left on %s: %s", home, left)
		}
	})

	t.Run("detach-logs-and-collected", func(t *testing.T) {
		out, errs, code := op.run(t, "run", "web", "-p", "jobs", "--detach", "--json", "--", "/testapp", "--exit-code", "0", "--say", "detached-marker", "--sleep", "12s")
		var d detachedDoc
		if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 || d.Machine != home || d.ID == "" {
			t.Fatalf("--detach --json: exit %d, %v\n%s\n%s", code, err, out, errs)
		}
		if !strings.HasPrefix(d.Logs, "ployz logs web -p jobs --container "+d.Container) {
			t.Errorf("logs hint %q", d.Logs)
		}
		var run *rpc.ContainerObservation
		for _, c := range ps(t, op, "jobs").Containers {
			if c.ID == d.ID {
				run = &c.ContainerObservation
			}
		}
		if run == nil || run.Labels[rpc.LabelKind] != rpc.KindRun || run.Ready || run.State != "running" {
			t.Fatalf("ps lists the detached run as %+v", run)
		}
		var ls struct {
			Services []struct {
				Service string `json:"service"`
				Total   int    `json:"containers"`
				Ready   int    `json:"ready"`
			} `json:"services"`
		}
		op.json(t, &ls, "ls", "-p", "jobs")
		if len(ls.Services) != 1 || ls.Services[0].Total != 1 || ls.Services[0].Ready != 1 {
			t.Errorf("ls counts the run as a replica: %+v", ls.Services)
		}
		fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		followed, _, _ := op.runCtx(fctx, t, "logs", "web", "-p", "jobs", "--container", d.Container, "-f")
		if !strings.Contains(followed, "detached-marker") || !strings.Contains(followed, "testapp run: exit 0") {
			t.Errorf("logs -f of the detached run:\n%s", followed)
		}
		eventually(t, 60*time.Second, "the ended detached run collected", func() error {
			if left := runs(home); left != "" {
				return fmt.Errorf("still on %s: %s", home, left)
			}
			return nil
		})
	})

	t.Run("keep", func(t *testing.T) {
		out, errs, code := op.run(t, "run", "web", "-p", "jobs", "--keep", "--", "/testapp", "--exit-code", "0", "--say", "kept-marker")
		if code != 0 || !strings.Contains(out, "kept-marker") {
			t.Fatalf("--keep: exit %d\n%s\n%s", code, out, errs)
		}
		time.Sleep(2 * reapWait)
		if left := runs(home); !strings.Contains(left, "jobs-production-web-run-") || !strings.Contains(left, "Exited (0)") {
			t.Fatalf("the kept run on %s: %q", home, left)
		}
		if out := op.must(t, "ps", "-p", "jobs"); !strings.Contains(out, "web (run)") {
			t.Errorf("ps does not show the kept run as one:\n%s", out)
		}
		// A redeploy leaves it alone; it is no replica to replace.
		doc, errs, code := deployFile(t, op, fmt.Sprintf(runCompose, lab.TestAppRef()))
		if code != 0 || doc.Plan.Changes() != 0 {
			t.Errorf("redeploy beside a kept run: exit %d, %d changes %+v\n%s", code, doc.Plan.Changes(), doc.Plan.Rows, errs)
		}
	})

	t.Run("ctrl-c", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type result struct {
			out, errs string
			code      int
		}
		res := make(chan result, 1)
		go func() {
			out, errs, code := op.runCtx(cctx, t, "run", "web", "-p", "jobs", "--", "/testapp", "--exit-code", "0", "--sleep", "60s")
			res <- result{out, errs, code}
		}()
		eventually(t, 30*time.Second, "the run sleeping", func() error {
			if left := runs(home); !strings.Contains(left, "Up") {
				return fmt.Errorf("runs on %s: %q", home, left)
			}
			return nil
		})
		time.Sleep(time.Second) // its process has set up its signal handler
		cancel()                // runCtx interrupts the CLI, as Ctrl-C does
		r := <-res
		if r.code != 130 || !strings.Contains(r.out, "got interrupt") {
			t.Fatalf("Ctrl-C: exit %d, want 130 from the process\n%s\n%s", r.code, r.out, r.errs)
		}
	})

	t.Run("tty", func(t *testing.T) {
		// script(1) gives the CLI a terminal, as an operator's shell does:
		// the process gets one too, and the exit code still comes through.
		op.pins.pin(t)
		argv := []string{op.bin(), "--ssh-key", op.key, "run", "web", "-p", "jobs", "--", "/testapp", "--exit-code", "5"}
		cmd := exec.Command("script", "-qefc", strings.Join(argv, " "), "/dev/null")
		cmd.Env = op.environ()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(string(out), "tty=true") || !strings.Contains(string(out), "MESSAGE=from-web-env") {
			t.Fatalf("ployz run in a terminal: %v\n%s", err, out)
		}
	})

	t.Run("socket-activation", func(t *testing.T) { sockActRedeploy(t, l, op) })

	t.Run("refusals", func(t *testing.T) {
		_, errs, code := op.run(t, "run", "web", "-p", "jobs", "--machine", other, "--", "/testapp", "--exit-code", "0")
		if code != 1 || !strings.Contains(errs, "does not hold volume") {
			t.Errorf("--machine %s without the volume: exit %d\n%s", other, code, errs)
		}
		_, errs, code = op.run(t, "run", "nope", "-p", "jobs")
		if code != 1 || !strings.Contains(errs, "service nope: not deployed in jobs-production") {
			t.Errorf("unknown service: exit %d\n%s", code, errs)
		}
		if left := runs(other); left != "" {
			t.Errorf("refused runs left Containers on %s: %s", other, left)
		}
	})
}

// reapWait is the daemon's reaper period (core/daemon reapPeriod).
const reapWait = 5 * time.Second
