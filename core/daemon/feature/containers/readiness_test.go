package containers

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/prereq"
)

// fakeRuns stands in for Docker: which Containers run since when.
type fakeRuns struct {
	mu  sync.Mutex
	run map[string]string
}

// running reports this test process as every Container's main process,
// so a Container "inside" which the test runs is named by ownCgroupID.
func (f *fakeRuns) running(_ context.Context, id string) (runInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.run[id]
	return runInfo{StartedAt: s, Pid: os.Getpid()}, ok
}

// ownCgroupID is a "Container ID" the test process's own cgroup names:
// the last element of its first non-root cgroup path.
func ownCgroupID(t *testing.T) string {
	t.Helper()
	cg, err := readCgroups(os.Getpid())
	if err != nil {
		prereq.Missing(t, "/proc/self/cgroup", err)
	}
	for _, p := range cg {
		if b := path.Base(p); b != "/" && b != "." && b != "" {
			return b
		}
	}
	prereq.Missing(t, "a cgroup of the test process's own (not the root)", errors.New("every cgroup path is /"))
	return ""
}

// newTestReadiness is a readiness on a throwaway notify dir.
func newTestReadiness(t *testing.T) (*readiness, *fakeRuns) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pzn") // short: a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	runs := &fakeRuns{run: map[string]string{}}
	return newReadiness(hclog.NewNullLogger(), dir, filepath.Join(t.TempDir(), "readiness.json"), runs.running), runs
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
	r, runs := newTestReadiness(t)
	state := r.statePath
	idA := ownCgroupID(t)
	a, err := r.open()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(r.dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("notify dir: %v %v, want 0700", fi.Mode(), err)
	}
	r.attach(a, idA)
	runs.set(idA, "run1")
	// Not a READY line: ignored.
	if err := sendNotify(t, a, "STATUS=starting\nREADY=10"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if r.isReady(idA, "run1") {
		t.Fatal("ready without READY=1")
	}
	if err := sendNotify(t, a, "STATUS=up\nREADY=1\n"); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return r.isReady(idA, "run1") }) {
		t.Fatal("READY=1 did not mark ready")
	}
	// A Docker restart starts a new run: not ready until it notifies.
	runs.set(idA, "run2")
	if r.isReady(idA, "run2") {
		t.Fatal("the new run inherited readiness")
	}
	// Saved for a daemon restart.
	if b, _ := os.ReadFile(state); !bytes.Contains(b, []byte(`"`+idA+`":"run1"`)) {
		t.Fatalf("state file: %s", b)
	}

	// A socket replaced for its Container no longer counts.
	b, _ := r.open()
	r.attach(b, "B")
	runs.set("B", "run1")
	stale := &notifySock{containerSock: containerSock{dir: b.dir, sock: b.conn, id: "B"}, conn: b.conn}
	r.notified(stale, "B", sender{pid: os.Getpid()})
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

// TestNotifyRefusesSenderGone: a sender that exits right after sending
// cannot be placed inside the Container and is refused, although it ran
// in the Container's very cgroup; the same datagram from a live sender
// counts.
func TestNotifyRefusesSenderGone(t *testing.T) {
	if p := os.Getenv("PLOYZ_TEST_NOTIFY_TO"); p != "" {
		sendAndExit(p)
	}
	r, runs := newTestReadiness(t)
	id := ownCgroupID(t)
	n, err := r.listen(filepath.Join(r.dir, "0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	r.attach(n, id)
	runs.set(id, "run1")
	path := filepath.Join(n.dir, notifySocketName)

	// No reader runs yet: the child has exited before the daemon reads.
	cmd := exec.Command(os.Args[0], "-test.run=^TestNotifyRefusesSenderGone$")
	cmd.Env = append(os.Environ(), "PLOYZ_TEST_NOTIFY_TO="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sender: %v: %s", err, out)
	}
	buf, oob := make([]byte, 4096), make([]byte, notifyOOB)
	if !r.receive(n, buf, oob) {
		t.Fatal("socket closed")
	}
	if r.isReady(id, "run1") {
		t.Fatal("READY=1 from a sender already gone marked the Container ready")
	}
	if got := r.refused.Load(); got != 1 {
		t.Fatalf("refused = %d, want 1", got)
	}

	if err := sendNotify(t, n, "READY=1"); err != nil {
		t.Fatal(err)
	}
	r.receive(n, buf, oob)
	if !r.isReady(id, "run1") {
		t.Fatal("READY=1 from a live sender inside the Container was not accepted")
	}
}

// sendAndExit is TestNotifyRefusesSenderGone's child.
func sendAndExit(path string) {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err == nil {
		_, err = c.Write([]byte("READY=1"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestNotifyBarrierReleased: fds a sender passes are closed once the
// datagram is handled, which is how BARRIER=1 tells a short-lived sender
// that its READY=1 has been read (and no fd a sender passes is kept).
func TestNotifyBarrierReleased(t *testing.T) {
	r, _ := newTestReadiness(t)
	n, err := r.open()
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	s, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(s)
	err = syscall.Sendmsg(s, []byte("BARRIER=1"), syscall.UnixRights(p[1]), &syscall.SockaddrUnix{Name: filepath.Join(n.dir, notifySocketName)}, 0)
	syscall.Close(p[1])
	if err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(p[0], true) // for the deadline
	rd := os.NewFile(uintptr(p[0]), "barrier")
	defer rd.Close()
	rd.SetReadDeadline(time.Now().Add(5 * time.Second)) // a pipe has deadlines
	if _, err := rd.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("barrier: %v, want EOF (the daemon closed the passed fd)", err)
	}
}

func TestSenderIdentity(t *testing.T) {
	if _, err := parseControl(nil).identify(); !errors.Is(err, errSenderUnknown) {
		t.Fatalf("no credentials: %v, want refused as unknown", err)
	}
	const id = "0f3c9a"
	v2 := cgroups{"0:": "/system.slice/docker-" + id + ".scope"}
	v1 := cgroups{"4:memory": "/docker/" + id, "9:name=systemd": "/docker/" + id, "3:cpuset": "/"}
	cases := []struct {
		name   string
		snd    cgroups
		main   cgroups
		inside bool
	}{
		{"v2 same cgroup", v2, v2, true},
		{"v2 sub-cgroup", cgroups{"0:": v2["0:"] + "/worker"}, v2, true},
		{"v1 every named hierarchy", cgroups{"4:memory": "/docker/" + id, "9:name=systemd": "/docker/" + id, "3:cpuset": "/"}, v1, true},
		{"host process", cgroups{"0:": "/user.slice/user-1000.slice/session-1.scope"}, v2, false},
		{"a user's delegated cgroup named after the Container", cgroups{"0:": "/user.slice/user-1000.slice/user@1000.service/docker-" + id + ".scope"}, v2, false},
		{"prefix without a path boundary", cgroups{"0:": v2["0:"] + "x"}, v2, false},
		{"v1 one hierarchy outside", cgroups{"4:memory": "/docker/" + id, "9:name=systemd": "/user.slice"}, v1, false},
		{"main process not in the Container's cgroup", v2, cgroups{"0:": "/"}, false},
	}
	for _, c := range cases {
		err := sender{pid: 1, cgroups: c.snd}.inside(id, c.main)
		if (err == nil) != c.inside {
			t.Errorf("%s: inside=%v (%v), want %v", c.name, err == nil, err, c.inside)
		}
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
