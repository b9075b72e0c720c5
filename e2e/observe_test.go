package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
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
	needLab(t)
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
