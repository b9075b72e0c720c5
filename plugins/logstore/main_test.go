package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/sdk/observe"
	"github.com/ployz/ployz/sdk/plugintest"
	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// TestBinaryKeepsOutputOfRemovedContainer runs ployz-logstore the way
// ployz-plugin@logstore.service does, next to the Docker installed here:
// a labelled Container's lines are followed as they come, stay readable
// after `docker rm`, and survive a plugin restart without duplicates.
func TestBinaryKeepsOutputOfRemovedContainer(t *testing.T) {
	img := dockertest.Image(t)
	root := dockertest.Root(t)
	bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/logstore")
	if out, _ := exec.Command(bin, "info").Output(); !strings.Contains(string(out), observe.CapLogHistory) {
		t.Fatalf("info does not advertise %s: %s", observe.CapLogHistory, out)
	}
	dir := t.TempDir()
	specPath := filepath.Join(dir, "kept", "logstore.json")
	socket := filepath.Join(dir, "logstore.sock")
	first := plugintest.ServeLongLived(t, bin, socket, "--spec", specPath)
	p := plugintest.Attach(t, socket)
	if caps := strings.Join(p.Info.GetCapabilities(), ","); caps != observe.CapTailLogs+","+observe.CapLogHistory {
		t.Fatalf("capabilities %s", caps)
	}
	if _, err := p.Base.Configure(context.Background(), configure(`{"state_dir":"relative"}`)); err == nil || !strings.Contains(err.Error(), "state_dir") {
		t.Fatalf("a bad spec must be refused naming the field: %v", err)
	}
	spec, _ := json.Marshal(observe.Spec{DockerRoot: root, StateDir: filepath.Join(dir, "observe")})
	p.Configure(t, spec)
	// The kept spec differs from the defaults it started on: it restarts.
	waitExit(t, first)
	plugintest.ServeLongLived(t, bin, socket, "--spec", specPath)
	p = plugintest.Attach(t, socket)
	cli := logstorev1.NewLogStoreClient(p.Conn)

	ns := fmt.Sprintf("lstest-%d", time.Now().UnixNano())
	sel := &logstorev1.Selector{Namespace: ns, Service: "web"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	follow, err := cli.TailLogs(ctx, &logstorev1.TailLogsRequest{Selector: sel, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(run(t, "docker", "run", "-d", "--log-driver", "local", "--label", "ployz.namespace="+ns,
		"--label", "ployz.service=web", "--label", "ployz.deployment=d1", img,
		"out", "first", "sleep", "1s", "err", "second", "sleep", "60s"))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	for _, want := range []string{"first", "second"} {
		e, err := follow.Recv()
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		if string(e.GetLine()) != want || e.GetContainerId() != id || e.GetService() != "web" || e.GetDeployment() != "d1" {
			t.Fatalf("followed %v, want %q", e, want)
		}
	}
	run(t, "docker", "rm", "-f", id)
	history := func() []string {
		t.Helper()
		var got []string
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			resp, err := cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: sel})
			if err != nil {
				continue // the restarted process is opening its store
			}
			got = nil
			for _, e := range resp.GetEntries() {
				got = append(got, e.GetStream()+":"+string(e.GetLine()))
			}
			if len(got) >= 2 {
				break
			}
		}
		return got
	}
	if got := strings.Join(history(), ","); got != "stdout:first,stderr:second" {
		t.Fatalf("history after docker rm = %s", got)
	}
	// Grep and a bad expression.
	resp, err := cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: sel, Grep: "^sec"})
	if err != nil || len(resp.GetEntries()) != 1 {
		t.Fatalf("grep: %v %v", resp, err)
	}
	if _, err := cli.LogHistory(ctx, &logstorev1.LogHistoryRequest{Selector: sel, Grep: "("}); err == nil || !strings.Contains(err.Error(), "grep") {
		t.Fatalf("a bad grep must be refused naming it: %v", err)
	}
}

func configure(spec string) *pluginv1.ConfigureRequest {
	return &pluginv1.ConfigureRequest{ApiVersion: 1, Config: []byte(spec)}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return string(out)
}

func waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return
		}
	}
	t.Fatalf("pid %d did not exit after its spec changed", cmd.Process.Pid)
}
