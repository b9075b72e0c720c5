package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

const observeCompose = `name: obs
services:
  chatter:
    image: ployz-testapp:latest
    environment: {MESSAGE: "%s"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
    deploy: {replicas: 2}
    x-placement: {max_per_machine: 1}
`

// logsDoc is `ployz logs --json`.
type logsDoc struct {
	Lines []struct {
		Machine       string `json:"machine"`
		Text          string `json:"text"`
		ContainerID   string `json:"container_id"`
		ContainerName string `json:"container_name"`
		Deployment    string `json:"deployment"`
	} `json:"lines"`
	Failed []struct{ Machine, Error string } `json:"failed"`
}

// TestLogsOutliveContainers: each Container of a Service logs a line it
// is asked to; the Service is redeployed, so Docker removes the old
// Containers; `ployz logs --since` still prints every old Container's
// line, from every Machine, prefixed with Machine and Container, and the
// filters narrow it.
func TestLogsOutliveContainers(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	formCluster(t, l, op)
	ctx := context.Background()
	if doc, errs, code := deployFile(t, op, fmt.Sprintf(observeCompose, "v1")); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy v1: exit %d\n%s", code, errs)
	}
	old := ps(t, op, "obs").Containers
	if len(old) != 2 {
		t.Fatalf("%d Containers, want 2", len(old))
	}
	markers := map[string]string{} // container id -> its line
	for _, c := range old {
		m := fmt.Sprintf("obs-marker-%s-%d", c.ID[:12], time.Now().UnixNano())
		markers[c.ID] = m
		if _, err := l.Exec(ctx, c.Machine, "docker", "exec", c.ID, "/testapp", "get", "http://127.0.0.1:8080/log?line="+m); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // the Log Store reads Docker's files twice a second
	if doc, errs, code := deployFile(t, op, fmt.Sprintf(observeCompose, "v2")); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy v2: exit %d\n%s", code, errs)
	}
	for _, c := range old {
		if out, err := l.Exec(ctx, c.Machine, "docker", "inspect", c.ID); err == nil {
			t.Fatalf("old Container %s still exists on %s after the redeploy: %s", c.ID[:12], c.Machine, out)
		}
	}

	var doc logsDoc
	op.json(t, &doc, "logs", "chatter", "-p", "obs", "--since", "10m")
	for _, c := range old {
		found := false
		for _, ln := range doc.Lines {
			if ln.Text == markers[c.ID] {
				found = ln.Machine == c.Machine && ln.ContainerID == c.ID
			}
		}
		if !found {
			t.Errorf("the line of removed Container %s on %s is missing or misattributed in:\n%+v", c.ID[:12], c.Machine, doc.Lines)
		}
	}
	if len(doc.Failed) != 0 {
		t.Errorf("Machines failed: %+v", doc.Failed)
	}

	out := op.must(t, "logs", "chatter", "-p", "obs", "--since", "10m", "--grep", "obs-marker")
	for _, c := range old {
		want := c.Machine + " " + c.Name + " "
		if !strings.Contains(out, want) || !strings.Contains(out, markers[c.ID]) {
			t.Errorf("text output lacks %q / %q:\n%s", want, markers[c.ID], out)
		}
	}
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 2 {
		t.Errorf("--grep obs-marker printed %d lines, want 2:\n%s", n, out)
	}
	// --machine and --container narrow to one removed Container.
	c := old[0]
	op.json(t, &doc, "logs", "chatter", "-p", "obs", "--since", "10m", "--machine", c.Machine, "--container", c.Name)
	for _, ln := range doc.Lines {
		if ln.Machine != c.Machine || ln.ContainerID != c.ID {
			t.Fatalf("--machine %s --container %s printed a line of %s on %s", c.Machine, c.Name, ln.ContainerName, ln.Machine)
		}
	}
	if len(doc.Lines) == 0 {
		t.Fatalf("--machine %s --container %s printed nothing", c.Machine, c.Name)
	}
	// A Machine whose Log Store is down is named, never skipped.
	if _, err := l.Exec(ctx, old[1].Machine, "systemctl", "stop", "ployz-plugin@logstore"); err != nil {
		t.Fatal(err)
	}
	outS, errs, code := op.run(t, "logs", "chatter", "-p", "obs", "--since", "10m")
	if code != 3 || !strings.Contains(errs, "machine "+old[1].Machine) || !strings.Contains(outS, markers[old[0].ID]) {
		t.Errorf("with m2's logstore stopped: exit %d (want 3)\n%s\n%s", code, outS, errs)
	}
}

const metricsCompose = `name: busy
services:
  burn:
    image: ployz-testapp:latest
    environment: {BURN_CPU: "1"}
    deploy: {replicas: 1}
  idle:
    image: ployz-testapp:latest
    deploy: {mode: global}
`

// topDoc is `ployz top --json`.
type topDoc struct {
	Containers []struct {
		Machine string   `json:"machine"`
		Service string   `json:"service"`
		CPU     *float64 `json:"cpu_cores"`
		Memory  *float64 `json:"memory_bytes"`
	} `json:"containers"`
}

// metricsDoc is `ployz metrics --json`.
type metricsDoc struct {
	Machines []struct {
		Machine string `json:"machine"`
		Error   string `json:"error"`
		Answer  *struct {
			Series []struct {
				Metric string `json:"metric"`
				Points []struct {
					Time  int64   `json:"time_unix_nano"`
					Value float64 `json:"value"`
				} `json:"points"`
			} `json:"series"`
			Gaps []struct {
				Metric string `json:"metric"`
				From   int64  `json:"from_unix_nano"`
				To     int64  `json:"to_unix_nano"`
				Reason string `json:"reason"`
			} `json:"gaps"`
		} `json:"answer"`
	} `json:"machines"`
}

// TestMetricsTopGapsAndPrometheus: a CPU-burning Service shows up in
// `ployz top` within 20 s of running; `ployz metrics` charts it; m2's
// daemon and metrics plugin stopped for 40 s is a named gap in m2's
// history with values on both sides; the Prometheus endpoint on m2's mesh
// address parses with Prometheus' own parser.
func TestMetricsTopGapsAndPrometheus(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	formCluster(t, l, op)
	ctx := context.Background()
	if doc, errs, code := deployFile(t, op, metricsCompose); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	deployed := time.Now()
	eventually(t, 40*time.Second, "ployz top shows burn busy", func() error {
		// A Machine whose metrics plugin is just restarting onto the spec
		// ployzd gave it is named (exit 3): ask again.
		var doc topDoc
		out, errs, code := op.run(t, "top", "--json")
		if code != 0 {
			return fmt.Errorf("ployz top: exit %d: %s", code, errs)
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			return err
		}
		for _, c := range doc.Containers {
			if c.Service == "burn" && c.CPU != nil && *c.CPU > 0.2 {
				t.Logf("burn at %.2f cores on %s, %s after the deploy", *c.CPU, c.Machine, time.Since(deployed).Round(time.Second))
				return nil
			}
		}
		return fmt.Errorf("burn not busy in %+v", doc.Containers)
	})
	// On a terminal `ployz top` is live: it redraws in place (here every
	// 2 s) until q, then leaves the alternate screen.
	live := topOnTerminal(t, op, 5*time.Second)
	if frames := strings.Count(live, "ployz top —"); frames < 2 || !strings.Contains(live, "burn") || !strings.Contains(live, "every 2s") ||
		!strings.Contains(live, "\x1b[?1049h") || !strings.HasSuffix(strings.TrimSpace(live), "\x1b[?1049l") {
		t.Errorf("live ployz top drew %d frames, or lacks burn, or did not restore the screen:\n%q", frames, live)
	}
	out := op.must(t, "metrics", "burn", "-p", "busy", "--since", "5m")
	if !strings.Contains(out, "cpu.cores") {
		t.Errorf("ployz metrics burn:\n%s", out)
	}

	// m2 down for 40 s: ployzd and its metrics plugin stopped.
	m2 := l.Machines[1].Name
	stopAt := time.Now()
	if _, err := l.Exec(ctx, m2, "systemctl", "stop", "ployz", "ployz-plugin@metrics"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(40 * time.Second)
	if _, err := l.Exec(ctx, m2, "systemctl", "start", "ployz"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "m2's history names the gap and has values after it", func() error {
		var doc metricsDoc
		out, errs, code := op.run(t, "metrics", "--machine", m2, "--since", "5m", "--json")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errs)
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Machines) != 1 || doc.Machines[0].Answer == nil {
			return fmt.Errorf("decode %q: %v", out, err)
		}
		a := doc.Machines[0].Answer
		var gap bool
		for _, g := range a.Gaps {
			if g.Metric == "*" && g.From <= stopAt.Add(15*time.Second).UnixNano() && g.To-g.From >= int64(30*time.Second) {
				gap = true
			}
		}
		var before, after bool
		for _, s := range a.Series {
			if s.Metric != "mem.bytes" {
				continue
			}
			for _, p := range s.Points {
				before = before || p.Time < stopAt.UnixNano()
				after = after || p.Time > stopAt.Add(40*time.Second).UnixNano()
			}
		}
		if !gap || !before || !after {
			return fmt.Errorf("gap %v, values before %v, after %v: %+v", gap, before, after, a.Gaps)
		}
		return nil
	})

	// Prometheus text on m2's mesh address, scraped from m1.
	var in rpc.Inspection
	op.json(t, &in, "machine", "inspect", m2)
	url := "http://" + net.JoinHostPort(in.ManagementIP, "9101") + "/metrics"
	// A restarted plugin has no CPU rate before its second tick: scrape
	// until it has.
	var fams map[string]*dto.MetricFamily
	eventually(t, 60*time.Second, "m2's Prometheus endpoint answers with CPU rates", func() error {
		text, err := l.Exec(ctx, l.Machines[0].Name, "curl", "-sf", "-g", url)
		if err != nil {
			return err
		}
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if fams, err = parser.TextToMetricFamilies(strings.NewReader(text + "\n")); err != nil {
			t.Fatalf("m2's /metrics does not parse: %v\n%s", err, text)
		}
		if fams["ployz_cpu_cores"] == nil {
			return fmt.Errorf("no ployz_cpu_cores yet in:\n%s", text)
		}
		return nil
	})
	if f := fams["ployz_cpu_cores"]; f == nil || len(f.GetMetric()) < 2 {
		t.Fatalf("ployz_cpu_cores on m2: %v", f)
	}
}

const floodCompose = `name: flood
services:
  flood:
    image: ployz-testapp:latest
    environment: {FLOOD_LINES_S: "4000"}
  quiet:
    image: ployz-testapp:latest
`

// floodBudget is the Observe Store budget TestDiskBudgetUnderFlood sets:
// a flood of ~800 kB/s passes it within seconds.
const floodBudget = 8 << 20

// TestDiskBudgetUnderFlood: with the Observe Store's budget set small on
// the Machine (`ployz machine update --observe-budget`), a Service floods its log for 50 s; the
// Observe Store's size on disk stays within the budget throughout, the
// flood's oldest lines go first and a query over them names the gap,
// while another Container's fresh lines stay readable through `ployz
// logs` during the flood.
func TestDiskBudgetUnderFlood(t *testing.T) {
	needLab(t)
	l := lab.ForTest(t, 1)
	op := newOperator(t, l)
	formCluster(t, l, op)
	ctx := context.Background()
	m1 := l.Machines[0].Name
	// The operator's way: a Machine setting, handed to both plugins by ployzd.
	if out, errs, code := op.run(t, "machine", "update", m1, "--observe-budget", "1KiB"); code == 0 || !strings.Contains(errs, "--observe-budget") {
		t.Errorf("a 1KiB budget: exit %d, want the flag named\n%s%s", code, out, errs)
	}
	op.must(t, "machine", "update", m1, "--observe-budget", "8MiB")
	if in := op.must(t, "machine", "inspect", m1); !strings.Contains(in, "ployz.observe.budget=8MiB") {
		t.Errorf("machine inspect does not show the budget label:\n%s", in)
	}
	eventually(t, 30*time.Second, "the logstore runs on the small budget", func() error {
		out, err := l.Exec(ctx, m1, "journalctl", "-u", "ployz-plugin@logstore", "--no-pager", "-o", "cat")
		if err != nil || !strings.Contains(out, fmt.Sprint(floodBudget)) {
			return fmt.Errorf("journal lacks max_bytes %d: %v", floodBudget, err)
		}
		return nil
	})
	started := time.Now()
	if doc, errs, code := deployFile(t, op, floodCompose); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	quiet := ps(t, op, "flood").Containers
	var quietID string
	for _, c := range quiet {
		if c.Service == "quiet" {
			quietID = c.ID
		}
	}
	if quietID == "" {
		t.Fatalf("no quiet Container in %+v", quiet)
	}
	var maxSize int64
	for i := 0; time.Since(started) < 50*time.Second; i++ {
		out, err := l.Exec(ctx, m1, "du", "-sb", "/var/lib/ployz/observe")
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		fmt.Sscan(out, &size)
		maxSize = max(maxSize, size)
		// du counts directories too: a few kB over the files retention weighs.
		if size > floodBudget+64<<10 {
			t.Errorf("%s into the flood the Observe Store holds %d bytes, budget %d", time.Since(started).Round(time.Second), size, floodBudget)
		}
		// The binary keeps serving: a quiet Container's new line is readable.
		marker := fmt.Sprintf("quiet-marker-%d", i)
		if _, err := l.Exec(ctx, m1, "docker", "exec", quietID, "/testapp", "get", "http://127.0.0.1:8080/log?line="+marker); err != nil {
			t.Fatal(err)
		}
		asked := time.Now()
		eventually(t, 15*time.Second, "the quiet Container's line during the flood", func() error {
			out, errs, code := op.run(t, "logs", "quiet", "-p", "flood", "--since", "2m", "--grep", marker)
			if code != 0 || !strings.Contains(out, marker) {
				return fmt.Errorf("exit %d: %s%s", code, out, errs)
			}
			return nil
		})
		if i == 0 || i%4 == 0 {
			t.Logf("%s: store %d bytes (budget %d); the quiet line readable %s after it was logged",
				time.Since(started).Round(time.Second), size, floodBudget, time.Since(asked).Round(10*time.Millisecond))
		}
		time.Sleep(3 * time.Second)
	}
	t.Logf("largest Observe Store seen during the flood: %d bytes of %d", maxSize, floodBudget)
	out, err := l.Exec(ctx, m1, "journalctl", "-u", "ployz-plugin@logstore", "--no-pager", "-o", "cat")
	if err != nil || !strings.Contains(out, "retention deleted the oldest chunks") {
		t.Errorf("the logstore never deleted for the budget: %v\n%s", err, out)
	}
	// The flood's first seconds are gone, named; its newest lines are kept.
	outS, errs, code := op.run(t, "logs", "flood", "-p", "flood", "--since", started.Add(-time.Minute).Format(time.RFC3339Nano),
		"--until", started.Add(10*time.Second).Format(time.RFC3339Nano), "--json")
	if code != 0 {
		t.Fatalf("logs over the flood's start: exit %d: %s", code, errs)
	}
	var doc struct {
		Lines []json.RawMessage `json:"lines"`
		Notes []string          `json:"notes"`
	}
	if err := json.Unmarshal([]byte(outS), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Lines) != 0 || len(doc.Notes) == 0 || !strings.Contains(strings.Join(doc.Notes, "\n"), "deleted by retention (size cap)") {
		t.Errorf("the flood's first 10 s: %d lines, notes %q; want none and the gap named", len(doc.Lines), doc.Notes)
	}
	last := op.must(t, "logs", "flood", "-p", "flood", "--tail", "3")
	if n := strings.Count(last, "| flood "); n != 3 {
		t.Errorf("the flood's newest 3 lines:\n%s", last)
	}
}

// topOnTerminal runs `ployz top --interval 2s` on a pseudo-terminal (script(1)), types
// q after d and returns what it drew; it fails the test unless top exits 0.
func topOnTerminal(t *testing.T, op *operator, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
	defer cancel()
	op.pins.pin(t)
	line := fmt.Sprintf("'%s' --ssh-key '%s' top --interval 2s", filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), op.key)
	cmd := exec.CommandContext(ctx, "script", "-qfec", line, "/dev/null")
	cmd.Env = append(append(os.Environ(), "PLOYZ_OPERATOR_STORE="+op.store, "TERM=xterm", "COLUMNS=120", "LINES=40"), op.env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(d)
		stdin.Write([]byte("q")) // top may have failed already
		time.Sleep(5 * time.Second)
		stdin.Close()
	}()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ployz top on a terminal: %v\n%q", err, out)
	}
	return string(out)
}
