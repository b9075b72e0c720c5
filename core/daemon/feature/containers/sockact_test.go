package containers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/launcher"
	"github.com/ployz/ployz/core/rpc"
)

var (
	launcherOnce sync.Once
	launcherBin  string
	launcherErr  error
)

// testLauncher builds cmd/ployz-launch statically (the launcher ployzd
// runs as on a Machine, without the rest of ployzd).
func testLauncher(t *testing.T) string {
	t.Helper()
	launcherOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ployz-launch")
		if err != nil {
			launcherErr = err
			return
		}
		launcherBin = filepath.Join(dir, "ployz-launch")
		cmd := exec.Command("go", "build", "-o", launcherBin, "github.com/ployz/ployz/cmd/ployz-launch")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			launcherErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if launcherErr != nil {
		t.Fatalf("build the launcher: %v", launcherErr)
	}
	return launcherBin
}

// withActivation gives to a throwaway activation dir and the test
// launcher.
func withActivation(t *testing.T, to *testOps) {
	t.Helper()
	bin := testLauncher(t)
	dir, err := os.MkdirTemp("", "pza") // short: a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	to.act = newActivation(testLogger(t), dir, func() (string, error) { return bin, nil }, to.runningSince)
	t.Cleanup(func() { to.act.release(0) })
}

// freePort is a TCP port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// connectLoop dials addr back to back, one GET / per connection and no
// retries, until stop: refused counts connections the kernel refused,
// failed the ones accepted but not answered 200.
type connectLoop struct {
	addr                    string
	ok, refused, failed     atomic.Int64
	lastHost                atomic.Value
	stop                    chan struct{}
	done                    chan struct{}
	firstFailure, firstRefd atomic.Value
	phase                   atomic.Value // what the replacements were doing
}

func startLoop(addr string) *connectLoop {
	l := &connectLoop{addr: addr, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			l.once()
		}
	}()
	return l
}

func (l *connectLoop) once() {
	c, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			l.refused.Add(1)
			l.firstRefd.CompareAndSwap(nil, fmt.Sprint(err, " during ", l.phase.Load()))
		} else {
			l.failed.Add(1)
			l.firstFailure.CompareAndSwap(nil, fmt.Sprint(err, " during ", l.phase.Load()))
		}
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second)) // test connection
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		l.failed.Add(1)
		l.firstFailure.CompareAndSwap(nil, fmt.Sprint(err, " during ", l.phase.Load()))
		return
	}
	var body struct{ Hostname string }
	json.NewDecoder(res.Body).Decode(&body) // hostname is informative
	res.Body.Close()
	l.lastHost.Store(body.Hostname)
	l.ok.Add(1)
}

func (l *connectLoop) end() { close(l.stop); <-l.done }

func (l *connectLoop) String() string {
	return fmt.Sprintf("ok %d, refused %d (first: %v), failed %d (first: %v)", l.ok.Load(), l.refused.Load(), l.firstRefd.Load(), l.failed.Load(), l.firstFailure.Load())
}

// waitServing waits until addr answers GET / from Container id's hostname.
func waitServing(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + addr + "/")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never answered", addr)
}

// replaceLoop runs 5 start-first replacements (create and start the new
// Container, then stop and remove the old one), as the planner does for
// an activated port, and one stop-first at the end; activated false runs
// the same Service published by Docker, which can only go stop-first.
func replaceLoop(t *testing.T, to *testOps, activated bool) (*connectLoop, time.Duration) {
	t.Helper()
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	spec := to.Spec("web", map[string]string{"PORT": "8080"})
	spec.Ports = []rpc.PortSpec{{ContainerPort: 8080, HostPort: port, Protocol: "tcp", SocketActivation: activated}}
	n := 0
	var loop *connectLoop
	mark := func(what string) {
		if loop != nil {
			loop.phase.Store(fmt.Sprintf("%s %d", what, n))
		}
	}
	create := func() string {
		n++
		mark("create")
		ob := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: fmt.Sprintf("%s-%d", to.Name("web"), n), Spec: spec})
		mark("start")
		featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.startContainer), rpc.ContainerRef{ID: ob.ID})
		mark("started")
		return ob.ID
	}
	retire := func(id string) {
		mark("stop")
		featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.stopContainer), rpc.StopContainerRequest{ID: id, GracePeriodSeconds: 2})
		mark("remove")
		featuretest.Must[rpc.ContainerRemoved](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: id})
		mark("after remove")
	}
	old := create()
	waitServing(t, addr)
	loop = startLoop(addr)
	start := time.Now()
	for i := 0; i < 5; i++ {
		time.Sleep(300 * time.Millisecond)
		if activated {
			id := create()
			waitServing(t, addr) // the new one runs; both accept now
			retire(old)
			old = id
		} else {
			retire(old)
			old = create()
			waitServing(t, addr)
		}
	}
	if activated { // stop-first too: the queue holds what arrives in the gap
		retire(old)
		create() // the last one goes with the test's other Containers
		waitServing(t, addr)
	}
	time.Sleep(300 * time.Millisecond)
	loop.end()
	return loop, time.Since(start)
}

// TestSocketActivationReplacements: behind an activated port, clients
// connecting through five replacements of the Container (and a stop-first
// one) are never refused; the same Service published by Docker is.
func TestSocketActivationReplacements(t *testing.T) {
	to := newTestOps(t)
	withActivation(t, to)
	loop, took := replaceLoop(t, to, true)
	t.Logf("socket activated, 5 start-first + 1 stop-first replacements in %s: %s", took.Round(time.Millisecond), loop)
	if loop.refused.Load() != 0 || loop.failed.Load() != 0 {
		t.Fatalf("socket activated: %s, want none refused or failed", loop)
	}
	if loop.ok.Load() < 20 {
		t.Fatalf("socket activated: only %d answers: the loop did not run", loop.ok.Load())
	}
	plain, took := replaceLoop(t, to, false)
	t.Logf("published by Docker, 5 stop-first replacements in %s: %s", took.Round(time.Millisecond), plain)
	if plain.refused.Load() == 0 {
		t.Errorf("published by Docker: no connection refused (%s): the comparison shows nothing", plain)
	}
}

// TestSocketActivationHandoff: the Container gets fd 3 with systemd's
// variables, Docker publishes nothing for the port, and the socket
// answers only its own Container: the host (root, outside it) and
// another Container that mounts it are refused.
func TestSocketActivationHandoff(t *testing.T) {
	to := newTestOps(t)
	withActivation(t, to)
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	spec := to.Spec("web", nil)
	spec.Ports = []rpc.PortSpec{{ContainerPort: 8080, HostPort: port, Protocol: "tcp", SocketActivation: true}}
	id := to.createStart(t, "web", spec)
	waitServing(t, addr)
	res, err := http.Get("http://" + addr + "/env")
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	json.NewDecoder(res.Body).Decode(&env) // checked below
	res.Body.Close()
	want := map[string]string{"LISTEN_FDS": "1", "LISTEN_PID": "1", "LISTEN_FDNAMES": "tcp-" + strconv.Itoa(port)}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q in the Container, want %q", k, env[k], v)
		}
	}
	ins, err := to.Cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.HostConfig.PortBindings) != 0 {
		t.Errorf("Docker publishes %v as well", ins.HostConfig.PortBindings)
	}
	to.act.mu.Lock()
	dir := to.act.socks[id].dir
	to.act.mu.Unlock()
	sock := filepath.Join(dir, launcher.SocketName)

	// The host, as root but outside the Container.
	before := to.act.refused.Load()
	if fd, _, err := launcher.Receive(sock, 0); err == nil || !strings.Contains(err.Error(), "refused by the Machine") {
		syscall.Close(fd)
		t.Fatalf("a process outside the Container got the socket: %v", err)
	}
	// Another Container that mounts this one's socket directory.
	ctx := context.Background()
	other, err := to.Cli.ContainerCreate(ctx, &container.Config{Image: to.Image, Entrypoint: []string{launcher.Path, "/testapp"},
		Labels: map[string]string{rpc.LabelNamespace: to.Namespace}},
		&container.HostConfig{Binds: []string{dir + ":" + launcher.SocketDir},
			Mounts: []mount.Mount{{Type: mount.TypeBind, Source: testLauncher(t), Target: launcher.Path, ReadOnly: true}}}, nil, nil, to.Name("intruder"))
	if err != nil {
		t.Fatal(err)
	}
	if err := to.Cli.ContainerStart(ctx, other.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	waitC, errC := to.Cli.ContainerWait(wctx, other.ID, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 1 {
			t.Errorf("the other Container exited %d, want 1 (refused)", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	logs, err := to.Cli.ContainerLogs(ctx, other.ID, container.LogsOptions{ShowStderr: true, ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(logs)
	logs.Close()
	if !strings.Contains(string(b), "refused by the Machine") {
		t.Errorf("the other Container's output: %q, want a refusal", b)
	}
	if got := to.act.refused.Load() - before; got != 2 {
		t.Errorf("refused counted %d, want 2", got)
	}
	// The Container it belongs to still serves.
	waitServing(t, addr)

	// Removing the last Container keeps the port through the grace, then
	// releases it.
	featuretest.Must[rpc.ContainerRemoved](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: id, Force: true})
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Fatalf("port released at once after the last Container: %v", err)
	} else {
		c.Close()
	}
	to.act.release(0)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatal("port still held after release")
	}
}
