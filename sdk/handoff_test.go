package sdk_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/prereq"
	"github.com/ployz/ployz/sdk"
)

// The handoff tests run a data plane in a child process (this test binary
// with handoffHelperEnv set): a UDP server answering every datagram with
// its pid. HandoffSignal makes it start its successor (this binary again).
const (
	handoffHelperEnv = "SDK_TEST_HANDOFF_HELPER"
	handoffDirEnv    = "SDK_TEST_HANDOFF_DIR"
	handoffFailEnv   = "SDK_TEST_HANDOFF_FAIL_SUCCESSOR"
	handoffDelayEnv  = "SDK_TEST_HANDOFF_SUCCESSOR_DELAY"
)

func TestMain(m *testing.M) {
	if os.Getenv(handoffHelperEnv) == "1" {
		os.Exit(handoffHelper())
	}
	os.Exit(m.Run())
}

func handoffHelper() int {
	dir := os.Getenv(handoffDirEnv)
	var pc net.PacketConn
	var fd atomic.Int64 // Serve sets it; the handoff goroutine reads it
	d := sdk.DataPlane{
		Name:     "echo",
		SpecPath: filepath.Join(dir, "spec"),
		Plugin:   func(string) *sdk.Plugin { return &sdk.Plugin{Name: "echo", Kind: "test", Version: "1"} },
		Sockets:  func() []sdk.HandoffSocket { return []sdk.HandoffSocket{{Name: "echo-udp", FD: int(fd.Load())}} },
		Serve: func(ctx context.Context, _ string, _ <-chan error, log hclog.Logger) int {
			successor := os.Getenv("LISTEN_FDS") == "1" && os.Getenv("LISTEN_PID") == strconv.Itoa(os.Getpid())
			var err error
			if successor {
				if os.Getenv(handoffFailEnv) == "1" {
					return 1 // a binary that cannot serve
				}
				if d, err := time.ParseDuration(os.Getenv(handoffDelayEnv)); err == nil {
					time.Sleep(d) // a slow start: the old process must keep answering
				}
				pc, err = net.FilePacketConn(os.NewFile(3, "echo-udp"))
			} else {
				pc, err = net.ListenPacket("udp4", "127.0.0.1:0")
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, "addr"), []byte(pc.LocalAddr().String()), 0o600)
				}
			}
			if err != nil {
				log.Error("socket", "error", err)
				return 1
			}
			rc, _ := pc.(syscall.Conn).SyscallConn()
			_ = rc.Control(func(f uintptr) {
				dup, _ := syscall.Dup(int(f))
				fd.Store(int64(dup))
			})
			go echo(pc)
			sdk.DataPlaneServing()
			<-ctx.Done()
			_ = pc.SetReadDeadline(time.Unix(1, 0)) // stop reading; the socket stays shared
			return 0
		},
	}
	return sdk.ServeDataPlane(d, []string{"--socket", filepath.Join(dir, "echo.sock")}, os.Stderr)
}

func echo(pc net.PacketConn) {
	me := []byte(strconv.Itoa(os.Getpid()))
	buf := make([]byte, 512)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo(me, from)
	}
}

// queryLoop sends one query at a time (1 s timeout, no retry) until stop
// and counts failures and which pids answered.
type queryLoop struct {
	mu     sync.Mutex
	ok     int
	failed int
	pids   map[string]int
	last   string
}

func (q *queryLoop) run(t *testing.T, addr string, stop <-chan struct{}) {
	q.pids = map[string]int{}
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := net.Dial("udp4", addr)
		if err != nil {
			t.Error(err)
			return
		}
		_ = c.SetDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		_, err = c.Write([]byte("q"))
		n := 0
		if err == nil {
			n, err = c.Read(buf)
		}
		_ = c.Close()
		q.mu.Lock()
		if err != nil {
			q.failed++
		} else {
			q.ok++
			q.pids[string(buf[:n])]++
			q.last = string(buf[:n])
		}
		q.mu.Unlock()
		time.Sleep(2 * time.Millisecond)
	}
}

type handoffRun struct {
	dir  string
	cmd  *exec.Cmd
	addr string
	q    *queryLoop
	stop chan struct{}
	done chan struct{}
}

func startHandoffHelper(t *testing.T, env ...string) *handoffRun {
	t.Helper()
	if testing.Short() {
		prereq.Skip(t, "-short: starts processes")
	}
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("helper log:\n%s", b)
		}
	})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, handoffHelperEnv+"=1", handoffDirEnv+"="+dir, "NOTIFY_SOCKET=")...)
	cmd.Stdout, cmd.Stderr = logf, logf // files: a successor outlives the helper
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &handoffRun{dir: dir, cmd: cmd, q: &queryLoop{}, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { r.killAll() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "addr"))
		rec, rerr := sdk.ReadReattach(sdk.ReattachPath(filepath.Join(dir, "echo.sock")))
		if err == nil && len(b) > 0 && rerr == nil {
			if !rec.Handoff {
				t.Fatalf("reattach record %+v does not offer a handoff", rec)
			}
			r.addr = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper did not serve: %v %v", err, rerr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	go func() { defer close(r.done); r.q.run(t, r.addr, r.stop) }()
	return r
}

func (r *handoffRun) killAll() {
	if rec, err := sdk.ReadReattach(sdk.ReattachPath(filepath.Join(r.dir, "echo.sock"))); err == nil && rec.Pid != r.cmd.Process.Pid {
		_ = syscall.Kill(rec.Pid, syscall.SIGKILL)
	}
	_ = r.cmd.Process.Kill()
	_, _ = r.cmd.Process.Wait()
}

func (r *handoffRun) finish() *queryLoop {
	close(r.stop)
	<-r.done
	return r.q
}

// TestHandoffStartsSuccessorBeforeStopping: on HandoffSignal a slow
// successor (1.5 s to start) takes the UDP socket over; the old process
// answers until it serves, then exits, and a 1 s-timeout query loop
// without retries loses nothing.
func TestHandoffStartsSuccessorBeforeStopping(t *testing.T) {
	r := startHandoffHelper(t, handoffDelayEnv+"=1500ms")
	old := strconv.Itoa(r.cmd.Process.Pid)
	time.Sleep(300 * time.Millisecond)
	if err := r.cmd.Process.Signal(sdk.HandoffSignal); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- r.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("old process: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("old process did not stop after handing over")
	}
	time.Sleep(500 * time.Millisecond)
	q := r.finish()
	rec, err := sdk.ReadReattach(sdk.ReattachPath(filepath.Join(r.dir, "echo.sock")))
	if err != nil || strconv.Itoa(rec.Pid) == old || !rec.Handoff {
		t.Fatalf("reattach record after the handoff = %+v, %v (old pid %s)", rec, err, old)
	}
	t.Logf("queries ok %d failed %d, answered by %v", q.ok, q.failed, q.pids)
	if q.failed != 0 {
		t.Errorf("%d queries failed during the handoff", q.failed)
	}
	if q.pids[old] == 0 || q.pids[strconv.Itoa(rec.Pid)] == 0 || q.last != strconv.Itoa(rec.Pid) {
		t.Errorf("answers by pid %v: want both the old (%s) and the successor (%d), the successor last", q.pids, old, rec.Pid)
	}
}

// TestHandoffBrokenSuccessorKeepsServing: a successor that exits at once
// leaves the old process serving, with nothing lost.
func TestHandoffBrokenSuccessorKeepsServing(t *testing.T) {
	r := startHandoffHelper(t, handoffFailEnv+"=1")
	old := strconv.Itoa(r.cmd.Process.Pid)
	time.Sleep(200 * time.Millisecond)
	asked := time.Now()
	if err := r.cmd.Process.Signal(sdk.HandoffSignal); err != nil {
		t.Fatal(err)
	}
	// The failure is written beside the socket for the host that asked.
	reportPath := sdk.HandoffReportPath(filepath.Join(r.dir, "echo.sock"))
	var rep sdk.HandoffReport
	for {
		var err error
		if rep, err = sdk.ReadHandoffReport(reportPath); err == nil {
			break
		}
		if time.Since(asked) > 10*time.Second {
			t.Fatalf("no handoff report within 10 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strconv.Itoa(rep.Pid) != old || !strings.Contains(rep.Error, "successor exited") || rep.At.Before(asked.Add(-time.Second)) {
		t.Errorf("handoff report %+v: want pid %s, the successor's exit, a time after the signal", rep, old)
	}
	t.Logf("failed handoff reported %s after the signal: %s", time.Since(asked).Round(time.Millisecond), rep.Error)
	time.Sleep(2 * time.Second)
	q := r.finish()
	log, _ := os.ReadFile(filepath.Join(r.dir, "log"))
	if !strings.Contains(string(log), "handoff failed; this process keeps serving") {
		t.Errorf("the old process did not report the failed handoff:\n%s", log)
	}
	if q.failed != 0 || q.last != old || len(q.pids) != 1 {
		t.Errorf("queries ok %d failed %d by %v: want all answered by the old process %s", q.ok, q.failed, q.pids, old)
	}
}
