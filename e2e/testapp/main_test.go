package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// build compiles testapp once per test into a temp dir.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "testapp")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

func httpGet(url string) (int, string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadyDelayAndNotify(t *testing.T) {
	bin := build(t)
	port := freePort(t)
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+port, "READY_DELAY=1500ms", "MESSAGE=hi", "NOTIFY_SOCKET="+sock)
	var stdout syncBuffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	defer cmd.Process.Kill()

	base := "http://127.0.0.1:" + port
	for {
		code, body := httpGet(base + "/")
		if code == 200 {
			if !strings.Contains(body, `"message":"hi"`) {
				t.Fatalf("/ = %s", body)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("testapp never answered: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := httpGet(base + "/healthz"); code != 503 && time.Since(start) < 1400*time.Millisecond {
		t.Errorf("/healthz before READY_DELAY = %d, want 503", code)
	}
	buf := make([]byte, 64)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no readiness notification: %v", err)
	}
	if got := string(buf[:n]); got != "READY=1" {
		t.Errorf("notification %q, want READY=1", got)
	}
	if el := time.Since(start); el < 1400*time.Millisecond {
		t.Errorf("notified after %s, before READY_DELAY", el)
	}
	if code, _ := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz after ready = %d", code)
	}
	if code, body := httpGet(base + "/env"); code != 200 || !strings.Contains(body, `"MESSAGE":"hi"`) {
		t.Errorf("/env = %d %s", code, body)
	}
	out, err := exec.Command(bin, "get", base+"/").Output()
	if err != nil || !strings.Contains(string(out), `"message":"hi"`) {
		t.Errorf("get subcommand: %q, %v", out, err)
	}
	if err := exec.Command(bin, "get", "http://127.0.0.1:1/").Run(); err == nil {
		t.Error("get of an unreachable URL exited 0")
	}
	if code, body := httpGet(base + "/log?line=follow-me-42"); code != 200 {
		t.Errorf("/log = %d %s", code, body)
	}
	// The process's stdout reaches the buffer through a pipe, a moment
	// after the answer.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stdout.String(), "follow-me-42\n"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("/log did not print its line; stdout %q", stdout.String())
		}
	}
	if code, _ := httpGet(base + "/log?line=a%0Ab"); code != 400 {
		t.Errorf("/log of two lines = %d, want 400", code)
	}
	hc := exec.Command(bin, "healthcheck")
	hc.Env = append(os.Environ(), "PORT="+port)
	if err := hc.Run(); err != nil {
		t.Errorf("healthcheck subcommand: %v", err)
	}
}

func TestCrashAndExitModes(t *testing.T) {
	bin := build(t)
	run := func(env ...string) (int, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), append([]string{"PORT=" + freePort(t)}, env...)...)
		start := time.Now()
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%v: want an exit error, got %v", env, err)
		}
		return ee.ExitCode(), time.Since(start)
	}
	if code, _ := run("CRASH_ON_START=1", "EXIT_CODE=7"); code != 7 {
		t.Errorf("crash on start exit code %d, want 7", code)
	}
	if code, el := run("EXIT_AFTER=300ms", "EXIT_CODE=3"); code != 3 || el < 300*time.Millisecond {
		t.Errorf("exit after: code %d after %s", code, el)
	}
	if code, _ := run("READY_DELAY=soon"); code != 2 {
		t.Errorf("bad READY_DELAY exit code %d, want 2", code)
	}
}

func TestProxyMode(t *testing.T) {
	bin := build(t)
	up, front := freePort(t), freePort(t)
	upstream := exec.Command(bin)
	upstream.Env = append(os.Environ(), "PORT="+up, "MESSAGE=behind")
	if err := upstream.Start(); err != nil {
		t.Fatal(err)
	}
	defer upstream.Process.Kill()
	conf := filepath.Join(t.TempDir(), "proxy.conf")
	os.WriteFile(conf, []byte("upstream http://127.0.0.1:"+up+"\nname edge\n"), 0o644)
	proxy := exec.Command(bin)
	proxy.Env = append(os.Environ(), "PORT="+front, "PROXY_CONFIG="+conf)
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second}).Get("http://127.0.0.1:" + front + "/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && resp.Header.Get("X-Proxy-Name") == "edge" && strings.Contains(string(b), `"message":"behind"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("proxy never answered through to the upstream: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOneShot: `testapp --exit-code N` prints its environment's MESSAGE
// and --say, copies stdin with --cat and exits N; a SIGINT ends --sleep
// with 130.
func TestOneShot(t *testing.T) {
	bin := build(t)
	shown := filepath.Join(t.TempDir(), "shown")
	if err := os.WriteFile(shown, []byte("shown file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--exit-code", "3", "--say", "hello", "--show", shown, "--cat")
	cmd.Env = append(os.Environ(), "MESSAGE=v7")
	cmd.Stdin = strings.NewReader("from stdin\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || out.String() != "testapp run: MESSAGE=v7\nhello\nshown file\nfrom stdin\n" || !strings.Contains(errb.String(), "tty=false") {
		t.Fatalf("exit-code 3: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	cmd = exec.Command(bin, "--exit-code", "0", "--sleep", "30s")
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(pipe)
	for line := ""; !strings.Contains(line, "sleeping"); {
		if line, err = r.ReadString('\n'); err != nil {
			t.Fatalf("before sleeping: %v", err)
		}
	}
	cmd.Process.Signal(os.Interrupt) // checked by the exit code
	rest, _ := io.ReadAll(r)
	err = cmd.Wait()
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(string(rest), "got interrupt") {
		t.Fatalf("SIGINT while sleeping: %v, stdout %q", err, rest)
	}
}

// TestWebSocketEcho: /ws echoes each text message with the Container's
// MESSAGE.
func TestWebSocketEcho(t *testing.T) {
	bin := build(t)
	port := freePort(t)
	app := exec.Command(bin)
	app.Env = append(os.Environ(), "PORT="+port, "MESSAGE=echoer")
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer app.Process.Kill()
	cfg, err := websocket.NewConfig("ws://127.0.0.1:"+port+"/ws", "http://unused")
	if err != nil {
		t.Fatal(err)
	}
	var conn *websocket.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if conn, err = websocket.DialConfig(cfg); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dial /ws: %v", err)
		}
	}
	defer conn.Close()
	host, _ := os.Hostname()
	for _, msg := range []string{"one", "two"} {
		if err := websocket.Message.Send(conn, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := websocket.Message.Receive(conn, &got); err != nil {
			t.Fatal(err)
		}
		if want := msg + " from " + host + " (echoer)"; got != want {
			t.Errorf("echo of %q: %q, want %q", msg, got, want)
		}
	}
}

// TestGRPCHealth: the HTTP port answers gRPC over h2c: Check is SERVING
// for MESSAGE and NOT_FOUND for another name, and Watch streams.
func TestGRPCHealth(t *testing.T) {
	bin := build(t)
	port := freePort(t)
	app := exec.Command(bin)
	app.Env = append(os.Environ(), "PORT="+port, "MESSAGE=v1")
	if err := app.Start(); err != nil {
		t.Fatal(err)
	}
	defer app.Process.Kill()
	cc, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "v1"}, grpc.WaitForReady(true))
	if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check v1: %v %v", res, err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "v2"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check v2: %v, want NOT_FOUND", err)
	}
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch v1: %v %v", m, err)
	}
	if code, body := httpGet("http://127.0.0.1:" + port + "/"); code != 200 || !strings.Contains(body, `"message":"v1"`) {
		t.Errorf("HTTP/1.1 beside gRPC: %d %s", code, body)
	}
}
