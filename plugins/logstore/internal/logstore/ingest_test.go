package logstore

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/dockertest"
	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/plugins/logstore/internal/dockerlog"
)

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestIngestRealContainerOutlivesIt runs a Container with the local log
// driver and Ployz's labels, with a log file small enough that Docker
// rotates it, removes it, and finds every line in the store afterwards.
func TestIngestRealContainerOutlivesIt(t *testing.T) {
	img := dockertest.Image(t)
	root := dockertest.Root(t)
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := NewIngester(root, s, hclog.NewNullLogger())
	defer in.Close()
	name := fmt.Sprintf("ployz-logstore-test-%d", time.Now().UnixNano())
	const n = 3000
	id := docker(t, "run", "-d", "--name", name, "--log-driver", "local", "--log-opt", "max-size=64k", "--log-opt", "max-file=10",
		"--log-opt", "compress=false", "--label", "ployz.namespace=p-test", "--label", "ployz.service=web", "--label", "ployz.deployment=dep9",
		img, "sleep", "1s", "lines", "line %d", "0", strconv.Itoa(n), "err", "oops", "raw", "tail-without-newline", "sleep", "30s")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Count this Container's lines, not the Ingester's: it reads every
	// Container of this host's Docker, and another test may flood one.
	mine := func() int {
		res, err := s.Query(Query{Sel: Selector{Service: "web", Namespace: "p-test"}})
		if err != nil {
			t.Fatal(err)
		}
		c := 0
		for _, h := range res.Hits {
			if h.Container.ID == id {
				c++
			}
		}
		return c
	}
	for ctx.Err() == nil {
		if err := in.Poll(); err != nil {
			t.Fatal(err)
		}
		if mine() >= n+1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	docker(t, "rm", "-f", id)
	if err := in.Poll(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Query(Query{Sel: Selector{Service: "web", Namespace: "p-test"}})
	if err != nil {
		t.Fatal(err)
	}
	var stdout []string
	var stderr, last string
	for _, h := range res.Hits {
		if h.Container.ID != id || h.Container.Name != name || h.Container.Deployment != "dep9" || h.Container.Removed == 0 {
			t.Fatalf("hit of %+v", h.Container)
		}
		switch {
		case h.Stream == streamStderr:
			stderr = string(h.Line)
		case string(h.Line) == "tail-without-newline":
			last = string(h.Line)
		default:
			stdout = append(stdout, string(h.Line))
		}
	}
	if len(stdout) != n || stdout[0] != "line 0" || stdout[n-1] != fmt.Sprintf("line %d", n-1) {
		t.Fatalf("%d stdout lines (want %d), first %q", len(stdout), n, stdout[:min(1, len(stdout))])
	}
	for i, l := range stdout {
		if l != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d = %q: lost or duplicated across rotation", i, l)
		}
	}
	if stderr != "oops" || last != "tail-without-newline" {
		t.Fatalf("stderr %q, last %q", stderr, last)
	}
	if in.Corrupt() != 0 {
		t.Fatalf("%d corrupt bytes", in.Corrupt())
	}
}

// TestIngestContainerSeenBeforeItStarts: Docker makes the log file only
// at start; a Container found while merely created is looked at again
// within seconds, not after the 30 s recheck of foreign Containers.
func TestIngestContainerSeenBeforeItStarts(t *testing.T) {
	img := dockertest.Image(t)
	root := dockertest.Root(t)
	s, _ := Open(t.TempDir())
	in := NewIngester(root, s, hclog.NewNullLogger())
	defer in.Close()
	id := docker(t, "create", "--log-driver", "local", "--label", "ployz.namespace=p-early", "--label", "ployz.service=web",
		img, "out", "early-line", "sleep", "30s")
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	if err := in.Poll(); err != nil {
		t.Fatal(err)
	}
	docker(t, "start", id)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		in.Poll()
		if in.Lines() > 0 {
			return
		}
	}
	t.Fatal("the line of a Container first seen before it started was not ingested within 10 s")
}

// TestIngestContainerSeenBeforeItsConfig: Docker makes a Container's
// directory before its config.v2.json; one found in between is looked at
// again within a second, not after the 30 s recheck of foreign ones.
func TestIngestContainerSeenBeforeItsConfig(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(t.TempDir())
	in := NewIngester(root, s, hclog.NewNullLogger())
	defer in.Close()
	dir := filepath.Join(root, "containers", "abc123")
	os.MkdirAll(filepath.Join(dir, "local-logs"), 0o700)
	if err := in.Poll(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.v2.json"), []byte(`{"ID":"abc123","Name":"/web-1","Config":{"Labels":{"ployz.namespace":"p","ployz.service":"web"}}}`), 0o600)
	os.WriteFile(filepath.Join(dir, "local-logs", "container.log"), dockerlog.Encode(nil, dockerlog.Entry{Source: "stdout", TimeNano: 1, Line: []byte("hello")}), 0o600)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		in.Poll()
		if in.Lines() == 1 {
			return
		}
	}
	t.Fatal("a Container first seen before its config was written was not ingested within 5 s")
}

// TestIngestSavesCursorsOnlyWhenTheyMove: at rest a poll writes no
// cursors file; new output moves a cursor and the next poll saves it.
func TestIngestSavesCursorsOnlyWhenTheyMove(t *testing.T) {
	root := t.TempDir()
	s, _ := Open(t.TempDir())
	in := NewIngester(root, s, hclog.NewNullLogger())
	defer in.Close()
	dir := filepath.Join(root, "containers", "abc123")
	os.MkdirAll(filepath.Join(dir, "local-logs"), 0o700)
	os.WriteFile(filepath.Join(dir, "config.v2.json"), []byte(`{"ID":"abc123","Name":"/web-1","Config":{"Labels":{"ployz.namespace":"p","ployz.service":"web"}}}`), 0o600)
	logPath := filepath.Join(dir, "local-logs", "container.log")
	os.WriteFile(logPath, dockerlog.Encode(nil, dockerlog.Entry{Source: "stdout", TimeNano: 1, Line: []byte("hello")}), 0o600)
	if err := in.Poll(); err != nil || in.Lines() != 1 {
		t.Fatalf("first poll: %v, %d lines", err, in.Lines())
	}
	saved, err := os.Stat(in.curPath)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := in.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if again, err := os.Stat(in.curPath); err != nil || !os.SameFile(saved, again) {
		t.Fatalf("polls at rest rewrote the cursors file (%v)", err)
	}
	f, _ := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(dockerlog.Encode(nil, dockerlog.Entry{Source: "stdout", TimeNano: 2, Line: []byte("again")}))
	f.Close()
	if err := in.Poll(); err != nil || in.Lines() != 2 {
		t.Fatalf("poll after new output: %v, %d lines", err, in.Lines())
	}
	var cur map[string]Cursor
	if err := obsfs.LoadJSON(in.curPath, &cur); err != nil {
		t.Fatal(err)
	}
	if cur["abc123"] != in.cursors["abc123"] {
		t.Fatalf("saved cursor %+v, want %+v", cur["abc123"], in.cursors["abc123"])
	}
}
