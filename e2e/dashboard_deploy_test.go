package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/internal/browsertest"
)

// slowCompose is a Service whose Containers become ready after delay.
const slowCompose = `name: dashslow
services:
  api:
    image: ployz-testapp:latest
    environment: {READY_DELAY: "%s", MESSAGE: "%s"}
    healthcheck:
      test: ["CMD", "/testapp", "healthcheck"]
      interval: 1s
      timeout: 2s
      retries: 3
      start_period: 30s
    deploy: {replicas: 3}
    x-placement: {max_per_machine: 1}
`

// cliDeployLive runs two `ployz deploy`s from the CLI while the Deploys
// page is open: the first (Containers ready after 15 s) shows running
// with its steps in flight, then completed on each Machine; the second
// (never ready, --ready-timeout 8s) ends failed on each Machine, which
// supersedes the first in the last outcome per Machine. `ployz deploy ls
// --json` reads the same records.
func cliDeployLive(t *testing.T, op *operator, b *browsertest.Browser, base string, machines []string) {
	t.Helper()
	ns := "dashslow-production"
	b.Do(t, "open the Deploys page", chromedp.Navigate(base+"/#/deploys"))
	b.WaitText(t, "#revisions", "dash-production", 30*time.Second)

	s := startDeploy(t, op, fmt.Sprintf(slowCompose, "15s", "a"))
	newest := "section.deploy"
	b.WaitText(t, newest+" h3", ns, 60*time.Second)
	b.WaitText(t, newest+" h3", "running", 10*time.Second)
	b.WaitText(t, newest+" tbody", "wait_ready", 60*time.Second)
	b.Shot(t, "deploys-cli-running")
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("ployz deploy: %v\n%s", err, s.errText.String())
	}
	b.WaitText(t, newest+" h3", "completed", 30*time.Second)
	for _, m := range machines {
		b.WaitText(t, fmt.Sprintf(`#outcomes tr[data-outcome="%s/%s"]`, ns, m), "completed", 10*time.Second)
	}
	b.Shot(t, "deploys-cli-completed")

	s = startDeploy(t, op, fmt.Sprintf(slowCompose, "1h", "b"), "--ready-timeout", "8s")
	if err := s.cmd.Wait(); err == nil {
		t.Fatalf("a deploy whose Containers never become ready exited 0\n%s", s.errText.String())
	}
	for _, m := range machines {
		b.WaitText(t, fmt.Sprintf(`#outcomes tr[data-outcome="%s/%s"]`, ns, m), "failed", 30*time.Second)
	}
	b.WaitText(t, newest+" h3", "partial", 10*time.Second)
	b.Shot(t, "deploys-cli-failed")

	var ls struct {
		Deploys      []deploy.Record      `json:"deploys"`
		LastOutcomes []deploy.LastOutcome `json:"last_outcomes"`
	}
	op.json(t, &ls, "deploy", "ls")
	if len(ls.Deploys) < 2 || ls.Deploys[0].Namespace != ns || ls.Deploys[0].Status != "partial" || ls.Deploys[1].Status != "completed" {
		t.Fatalf("ployz deploy ls: %+v", ls.Deploys)
	}
	failed := 0
	for _, o := range ls.LastOutcomes {
		if o.Namespace == ns && o.Status == deploy.StepFailed && strings.Contains(o.Error, "wait_ready") {
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("ployz deploy ls last outcomes: %d failed in %s, want 3: %+v", failed, ns, ls.LastOutcomes)
	}
}

// startDeploy runs `ployz deploy -y` of compose in the background.
func startDeploy(t *testing.T, op *operator, compose string, extra ...string) *streamed {
	t.Helper()
	f := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(f, []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	return op.stream(context.Background(), t, append([]string{"deploy", "-f", f, "-y"}, extra...)...)
}
