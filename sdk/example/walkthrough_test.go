package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/plugintest"
)

// pluginStatus is the part of `ployzd plugins ls --json` the walkthrough reads.
type pluginStatus struct {
	Name          string   `json:"name"`
	Lifecycle     string   `json:"lifecycle"`
	Health        string   `json:"health"`
	Error         string   `json:"error"`
	SHA256        string   `json:"sha256"`
	RunningSHA256 string   `json:"running_sha256"`
	Version       string   `json:"version"`
	Capabilities  []string `json:"capabilities"`
	Pid           int      `json:"pid"`
}

// TestWalkthrough runs README.md's steps with real binaries: build, look,
// install and list managed, see a tampered blob refused, serve long-lived,
// install and list it, then swap it by digest to a new release.
func TestWalkthrough(t *testing.T) {
	example := plugintest.Build(t, "github.com/ployz/ployz/sdk/example")
	ployzd := plugintest.Build(t, "github.com/ployz/ployz/cmd/ployzd")
	dir, run := filepath.Join(t.TempDir(), "plugins"), filepath.Join(t.TempDir(), "run")

	sh := func(bin string, args ...string) string {
		t.Helper()
		var stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s%s", filepath.Base(bin), args, err, out, stderr.String())
		}
		return string(out)
	}
	ls := func() pluginStatus {
		t.Helper()
		out := sh(ployzd, "plugins", "ls", "--dir", dir, "--socket-dir", run, "--json", "--timeout", "20s")
		var st []pluginStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil || len(st) != 1 {
			t.Fatalf("plugins ls: %v\n%s", err, out)
		}
		return st[0]
	}
	install := func(bin, lifecycle string) string {
		t.Helper()
		out := sh(ployzd, "plugins", "install", bin, "--name", "example", "--dir", dir, "--lifecycle", lifecycle)
		f := strings.Fields(out)
		return f[len(f)-1]
	}

	// 4. Build it and look at it.
	if out := sh(example, "--version"); out != "ployz-example 0.1.0\n" {
		t.Fatalf("--version: %q", out)
	}
	if out := sh(example, "info"); !strings.Contains(out, `"example.dns.spec-store.v1"`) {
		t.Fatalf("info: %s", out)
	}

	// 5. Managed, under ployzd; a changed byte in the blob is refused.
	digest := install(example, "managed")
	st := ls()
	if st.Health != "healthy" || st.Lifecycle != "managed" || st.SHA256 != digest || len(st.Capabilities) != 1 {
		t.Fatalf("managed: %+v", st)
	}
	blob := filepath.Join(dir, "blobs", "sha256", digest)
	f, err := os.OpenFile(blob, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	f.Close()
	if st := ls(); st.Health != "refused" || !strings.Contains(st.Error, digest) {
		t.Fatalf("tampered blob: %+v", st)
	}

	// 6. Long-lived: its own process; ployzd attaches and leaves it running.
	first := digest
	if install(example, "long-lived") != first {
		t.Fatal("the same binary installed under another digest")
	}
	proc := plugintest.ServeLongLived(t, filepath.Join(dir, "bin", "example"), filepath.Join(run, "example.sock"))
	st = ls()
	if st.Health != "healthy" || st.Lifecycle != "long-lived" || st.Pid != proc.Process.Pid || st.Version != "0.1.0" {
		t.Fatalf("long-lived: %+v (process %d)", st, proc.Process.Pid)
	}

	// 7. Swapped by digest: a new release is installed beside the old one;
	// the running process keeps the old binary until its unit restarts.
	next := plugintest.Build(t, "github.com/ployz/ployz/sdk/example", "-X main.version=0.2.0")
	second := install(next, "long-lived")
	if st := ls(); st.SHA256 != second || st.RunningSHA256 != first || st.Pid != proc.Process.Pid {
		t.Fatalf("after installing 0.2.0: %+v", st)
	}
	// What systemctl restart ployz-plugin@example does (ployzd does it
	// itself once the new blob verifies).
	_ = proc.Process.Signal(syscall.SIGTERM)
	waitGone(t, proc.Process.Pid)
	proc = plugintest.ServeLongLived(t, filepath.Join(dir, "bin", "example"), filepath.Join(run, "example.sock"))
	if st := ls(); st.Health != "healthy" || st.Version != "0.2.0" || st.SHA256 != second || st.RunningSHA256 != "" || st.Pid != proc.Process.Pid {
		t.Fatalf("after the restart onto 0.2.0: %+v", st)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
	t.Fatalf("pid %d did not exit", pid)
}
