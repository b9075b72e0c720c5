package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
