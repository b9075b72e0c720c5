package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// fakeRuns stands in for Docker: which Containers run since when.
type fakeRuns struct {
	mu  sync.Mutex
	run map[string]string
}

func (f *fakeRuns) running(_ context.Context, id string) (runInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.run[id]
	return runInfo{StartedAt: s}, ok
}

func (f *fakeRuns) set(id, started string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run[id] = started
}

func sendNotify(t *testing.T, n *notifySock, msg string) error {
	t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: filepath.Join(n.dir, notifySocketName), Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(msg))
	return err
}

func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func TestNotifyOneShotPerRun(t *testing.T) {
	dir, err := os.MkdirTemp("", "pzn")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	runs := &fakeRuns{run: map[string]string{}}
	state := filepath.Join(t.TempDir(), "readiness.json")
	r := newReadiness(hclog.NewNullLogger(), dir, state, runs.running)

	a, err := r.open()
	if err != nil {
		t.Fatal(err)
	}
	r.attach(a, "A")
	runs.set("A", "run1")
	// Not a READY line: ignored.
	if err := sendNotify(t, a, "STATUS=starting\nREADY=10"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if r.isReady("A", "run1") {
		t.Fatal("ready without READY=1")
	}
	if err := sendNotify(t, a, "STATUS=up\nREADY=1\n"); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return r.isReady("A", "run1") }) {
		t.Fatal("READY=1 did not mark ready")
	}
	// A Docker restart starts a new run: not ready until it notifies.
	runs.set("A", "run2")
	if r.isReady("A", "run2") {
		t.Fatal("the new run inherited readiness")
	}
	// Saved for a daemon restart.
	if b, _ := os.ReadFile(state); !bytes.Contains(b, []byte(`"A":"run1"`)) {
		t.Fatalf("state file: %s", b)
	}

	// A socket replaced for its Container no longer counts.
	b, _ := r.open()
	r.attach(b, "B")
	runs.set("B", "run1")
	stale := &notifySock{dir: b.dir, conn: b.conn, id: "B"}
	r.notified(stale, "B", 0)
	if r.isReady("B", "run1") {
		t.Fatal("a notification on a socket not serving B marked it ready")
	}

	// Removing a Container closes its socket: nothing can notify there.
	r.forget("B")
	if err := sendNotify(t, b, "READY=1"); err == nil {
		t.Fatal("a removed Container's socket still accepts notifications")
	}
	if _, err := os.Stat(b.dir); !os.IsNotExist(err) {
		t.Fatalf("socket dir after forget: %v", err)
	}
}

func TestParseLogs(t *testing.T) {
	var buf bytes.Buffer
	frame := func(stream byte, s string) {
		h := make([]byte, 8)
		h[0] = stream
		binary.BigEndian.PutUint32(h[4:], uint32(len(s)))
		buf.Write(h)
		buf.WriteString(s)
	}
	frame(1, "2026-01-02T03:04:05.000000006Z hello\n")
	frame(2, "2026-01-02T03:04:06Z oops ")
	frame(2, "split\n")
	frame(1, "no timestamp")
	lines, err := parseLogs(&buf, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[0].Text != "hello" || lines[0].Stream != "stdout" || lines[0].Time == 0 ||
		lines[1].Text != "oops split" || lines[1].Stream != "stderr" || lines[2].Text != "no timestamp" {
		t.Fatalf("lines: %+v", lines)
	}
}
