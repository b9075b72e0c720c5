package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/plugintest"
	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
)

// TestBinaryHoldsAFloodToTheBudget runs ployz-logstore on an 8 MiB budget
// next to the Docker installed here while one Container floods (~800
// kB/s for 25 s, about 20 MB) and another logs a line a second: the store
// on disk never passes the budget, the quiet Container's new lines are
// readable throughout, the flood's first lines are gone with a named gap
// and its newest are kept.
func TestBinaryHoldsAFloodToTheBudget(t *testing.T) {
	if testing.Short() {
		prereq.Skip(t, "-short: a 25 s flood")
	}
	img := dockertest.Image(t)
	root := dockertest.Root(t)
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/logstore")
	dir := t.TempDir()
	const budget = 8 << 20
	specPath := filepath.Join(dir, "logstore.json")
	spec, _ := json.Marshal(observe.Spec{DockerRoot: root, StateDir: filepath.Join(dir, "observe"),
		Budget: observe.Budget{MaxBytes: budget, MinFreeBytes: 1}})
	if err := os.WriteFile(specPath, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "logstore.sock")
	plugintest.ServeLongLived(t, bin, socket, "--spec", specPath)
	cli := logstorev1.NewLogStoreClient(plugintest.Attach(t, socket).Conn)

	ns := fmt.Sprintf("lsflood-%d", time.Now().UnixNano())
	start := time.Now()
	docker := func(service string, script ...string) {
		id := strings.TrimSpace(run(t, "docker", append([]string{"run", "-d", "--log-driver", "local", "--label", "ployz.namespace=" + ns,
			"--label", "ployz.service=" + service, img}, script...)...))
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	}
	// 1000 lines of ~200 bytes every 0.25 s.
	docker("flood", "every", "250ms", "1000", "flood "+strings.Repeat("0", 190))
	docker("quiet", "every", "1s", "1", "quiet %d")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var maxSize int64
	seen := map[string]bool{} // the quiet Container's newest line at each look
	for time.Since(start) < 25*time.Second {
		time.Sleep(500 * time.Millisecond)
		size := dirBytes(t, filepath.Join(dir, "observe"))
		maxSize = max(maxSize, size)
		if size > budget {
			t.Errorf("%s into the flood the store holds %d bytes, budget %d", time.Since(start).Round(time.Millisecond), size, budget)
		}
		resp, err := cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: &logstorev1.Selector{Namespace: ns, Service: "quiet"}, Limit: 1, Newest: true})
		if err != nil {
			t.Fatalf("the quiet Container's newest line during the flood: %v", err)
		}
		if es := resp.GetEntries(); len(es) == 1 {
			seen[string(es[0].GetLine())] = true
		}
	}
	t.Logf("largest store during the flood: %d bytes of %d; %d new lines of the quiet Container read during it", maxSize, budget, len(seen))
	if len(seen) < 15 { // a line a second for 25 s, less its start
		t.Errorf("the quiet Container's newest line changed only %d times during the flood: %v", len(seen), seen)
	}
	resp, err := cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: &logstorev1.Selector{Namespace: ns, Service: "flood"},
		FromUnixNanos: start.Add(-time.Second).UnixNano(), ToUnixNanos: start.Add(3 * time.Second).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetEntries()) != 0 || len(resp.GetGaps()) != 1 || !strings.Contains(resp.GetGaps()[0].GetReason(), "size cap") {
		t.Errorf("the flood's first 3 s: %d lines, gaps %v; want none and the size cap named", len(resp.GetEntries()), resp.GetGaps())
	}
	resp, err = cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: &logstorev1.Selector{Namespace: ns, Service: "flood"}, Limit: 5, Newest: true})
	if err != nil || len(resp.GetEntries()) != 5 || time.Since(time.Unix(0, resp.GetEntries()[4].GetTimeUnixNanos())) > 5*time.Second {
		t.Errorf("the flood's newest 5 lines: %v %v", resp.GetEntries(), err)
	}
}

// dirBytes sums the sizes of the files under dir, as retention does.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
