// Command testapp is the workload lab tests deploy: a static HTTP server
// packaged FROM scratch, whose readiness and failures tests can dial in
// through its environment.
//
//	PORT=8080            listen port
//	READY_DELAY=3s       /healthz answers 503 until this long after start
//	CRASH_ON_START=1     exit at once with EXIT_CODE (default 1)
//	EXIT_AFTER=10s       exit with EXIT_CODE this long after start
//	EXIT_CODE=N          the exit code of the two modes above
//	testapp fill PATH N  writes N pseudo-random bytes to PATH (volume tests)
//	testapp --exit-code N [--say TEXT] [--show PATH] [--cat] [--sleep D]
//	                     a one-off task (`ployz run`, oneshot.go): prints
//	                     MESSAGE, TEXT and PATH, copies stdin with --cat,
//	                     sleeps D until SIGINT/SIGTERM, exits N
//	testapp notify       sends READY=1 to $NOTIFY_SOCKET and exits once a
//	                     BARRIER=1 after it is released (a short-lived
//	                     notifier, as systemd-notify --ready is); exit 1
//	                     when the socket cannot be reached
//	MESSAGE=text         returned by /
//	DATA_DIR=path        /append?line=TEXT appends TEXT to path/appended
//	                     and fsyncs it before answering (a stateful
//	                     Service: volume moves)
//	NOTIFY_SOCKET=path   send READY=1 there once ready (sd_notify protocol)
//	LISTEN_FDS=1         with LISTEN_PID its own pid: serve on the inherited
//	                     fd 3 (systemd socket activation, compose
//	                     x-socket-activation) instead of PORT, and on
//	                     SIGTERM stop accepting, finish what it has and exit
//	FLOOD_LINES_S=N      print N numbered lines of ~200 bytes a second on
//	                     stdout (a Service flooding its log)
//	PROXY_CONFIG=path    act as a reverse proxy configured by that file:
//	                     "upstream URL" and "name TEXT" lines; / is proxied
//	                     with an X-Proxy-Name: TEXT response header
//
// Endpoints: / (JSON: hostname, message, ready), /healthz, /env,
// /bytes?n=N (N zero bytes, for throughput measurements) and /ws (a
// WebSocket answering each text message TEXT with "TEXT from HOSTNAME
// (MESSAGE)", for the ingress's WebSocket and drain checks). The same
// port answers gRPC over h2c: the standard health service, SERVING for
// the service names "" and MESSAGE (so a Check names the Container's
// release), Watch streaming until the call ends.
// `testapp healthcheck` probes /healthz on localhost, for Docker HEALTHCHECK
// in an image that has no shell or curl; `testapp get URL` prints a URL's
// body, a client for tests inside such a container.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	port := envOr("PORT", "8080")
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(port))
	}
	if len(os.Args) > 2 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2]))
	}
	if len(os.Args) > 1 && os.Args[1] == "notify" {
		os.Exit(notifyAndWait())
	}
	if len(os.Args) > 3 && os.Args[1] == "fill" {
		os.Exit(fill(os.Args[2], os.Args[3]))
	}
	if len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "--") {
		os.Exit(oneShot(os.Args[1:]))
	}
	code := 1
	if s := os.Getenv("EXIT_CODE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			fatal("EXIT_CODE: %q is not an integer", s)
		}
		code = n
	}
	if os.Getenv("CRASH_ON_START") == "1" {
		fmt.Fprintf(os.Stderr, "testapp: crashing on start with exit code %d\n", code)
		os.Exit(code)
	}
	if os.Getenv("BURN_CPU") == "1" { // a busy Service for the metrics scenarios
		go func() {
			for x := 0; ; x++ {
				_ = x * x
			}
		}()
	}
	delay := duration("READY_DELAY")
	if d := duration("EXIT_AFTER"); d > 0 {
		time.AfterFunc(d, func() {
			fmt.Fprintf(os.Stderr, "testapp: exiting after %s with code %d\n", d, code)
			os.Exit(code)
		})
	}

	oomOnSignal()
	floodLogs()
	var ready atomic.Bool
	time.AfterFunc(delay, func() {
		ready.Store(true)
		fmt.Println("testapp: ready")
		notify()
	})
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	if p := os.Getenv("PROXY_CONFIG"); p != "" {
		mux.Handle("/", proxy(p))
	} else {
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"hostname": host, "message": os.Getenv("MESSAGE"), "ready": ready.Load(), "path": r.URL.Path})
		})
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "n: want a byte count", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	if dir := os.Getenv("DATA_DIR"); dir != "" {
		mux.HandleFunc("/append", func(w http.ResponseWriter, r *http.Request) {
			line := r.URL.Query().Get("line")
			if line == "" || strings.ContainsAny(line, "\r\n") {
				http.Error(w, "line: want one line of text", http.StatusBadRequest)
				return
			}
			if err := appendSynced(dir+"/appended", line+"\n"); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"hostname": host, "line": line})
		})
	}
	// /log?line=TEXT prints TEXT on stdout, so a test can make a running
	// Container log a line it knows and watch for it (logs -f).
	mux.HandleFunc("/log", func(w http.ResponseWriter, r *http.Request) {
		line := r.URL.Query().Get("line")
		if line == "" || strings.ContainsAny(line, "\r\n") {
			http.Error(w, "line: want one line of text", http.StatusBadRequest)
			return
		}
		fmt.Println(line)
		fmt.Fprintln(w, "logged")
	})
	mux.Handle("/ws", wsEcho(host))
	mux.HandleFunc("/env", func(w http.ResponseWriter, r *http.Request) {
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		writeJSON(w, http.StatusOK, env)
	})
	if ln := inherited(); ln != nil {
		fmt.Printf("testapp: serving the inherited socket %s (%s), ready in %s\n", ln.Addr(), os.Getenv("LISTEN_FDNAMES"), delay)
		serveActivated(ln, mux)
		return
	}
	fmt.Printf("testapp: listening on :%s, ready in %s\n", port, delay)
	srv := &http.Server{Addr: ":" + port, Handler: withGRPC(mux), Protocols: new(http.Protocols)}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true) // h2c, for gRPC
	if err := srv.ListenAndServe(); err != nil {
		fatal("listen: %v", err)
	}
}

// wsEcho answers each text message on a WebSocket with the message, the
// Container's hostname and MESSAGE, so a test learns which Container
// echoed. A websocket.Server, not websocket.Handler: clients without an
// Origin header (tests, not browsers) are accepted.
func wsEcho(host string) http.Handler {
	return websocket.Server{Handler: func(c *websocket.Conn) {
		defer c.Close()
		for {
			var msg string
			if err := websocket.Message.Receive(c, &msg); err != nil {
				return // the peer's close frame, or the connection ended
			}
			if err := websocket.Message.Send(c, fmt.Sprintf("%s from %s (%s)", msg, host, os.Getenv("MESSAGE"))); err != nil {
				return
			}
		}
	}}
}

// withGRPC answers gRPC requests (HTTP/2, Content-Type application/grpc)
// with a health service and the rest with h.
func withGRPC(h http.Handler) http.Handler {
	hs := health.NewServer()
	hs.SetServingStatus(os.Getenv("MESSAGE"), healthpb.HealthCheckResponse_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// inherited is the listening socket passed as fd 3 (sd_listen_fds(3)),
// or nil when none was passed to this process.
func inherited() net.Listener {
	if os.Getenv("LISTEN_PID") != strconv.Itoa(os.Getpid()) || os.Getenv("LISTEN_FDS") != "1" {
		return nil
	}
	f := os.NewFile(3, "listen")
	ln, err := net.FileListener(f)
	if err != nil {
		fatal("LISTEN_FDS: fd 3: %v", err)
	}
	f.Close()
	return ln
}

// serveActivated serves ln until SIGTERM, then stops accepting (what is
// still queued goes to the other holders of the socket) and exits once
// every connection it accepted was answered. Not http.Server.Shutdown:
// that drops a request read after it began, unanswered, so a connection
// accepted just before the signal would fail.
func serveActivated(ln net.Listener, h http.Handler) {
	var active atomic.Int64
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			active.Add(1)
		case http.StateClosed, http.StateHijacked:
			active.Add(-1)
		}
	}}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.SetKeepAlivesEnabled(false) // each connection closes after its answer
		ln.Close()
	}()
	err := srv.Serve(ln)
	if !errors.Is(err, net.ErrClosed) {
		fatal("serve: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); active.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// hogged keeps oomOnSignal's allocations reachable, so the collector
// cannot free them and the heap only grows.
var hogged [][]byte

// oomOnSignal grows the heap by 4 MiB steps, touching every page, from
// the first SIGUSR1 on: with a memory limit the kernel's OOM killer ends
// the process.
func oomOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		<-ch
		fmt.Fprintln(os.Stderr, "testapp: SIGUSR1: allocating until the OOM killer ends this process")
		for {
			b := make([]byte, 4<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			hogged = append(hogged, b)
		}
	}()
}

// floodLogs prints FLOOD_LINES_S lines a second, in batches every 10 ms.
func floodLogs() {
	s := os.Getenv("FLOOD_LINES_S")
	if s == "" {
		return
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		fatal("FLOOD_LINES_S: %q is not a positive integer", s)
	}
	go func() {
		w := bufio.NewWriterSize(os.Stdout, 256<<10)
		pad := strings.Repeat("f", 170)
		seq, start := 0, time.Now()
		for range time.Tick(10 * time.Millisecond) {
			due := int(time.Since(start).Seconds() * float64(n))
			for ; seq < due; seq++ {
				fmt.Fprintf(w, "flood %09d %s\n", seq, pad)
			}
			w.Flush()
		}
	}()
}

// notify sends READY=1 once to $NOTIFY_SOCKET, as sd_notify(3) does.
func notify() {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: %v\n", err)
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte("READY=1")); err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: %v\n", err)
	}
}

// notifyAndWait sends READY=1, then BARRIER=1 with the write end of a
// pipe, and waits until the receiver closes it (sd_notify_barrier(3)):
// by then the receiver has handled READY=1 while this process lived.
func notifyAndWait() int {
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: os.Getenv("NOTIFY_SOCKET"), Net: "unixgram"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: %v\n", err)
		return 1
	}
	defer c.Close()
	if _, err := c.Write([]byte("READY=1")); err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: %v\n", err)
		return 1
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: pipe: %v\n", err)
		return 1
	}
	// WriteMsgUnix refuses a connected datagram socket: sendmsg directly.
	raw, err := c.SyscallConn()
	if err == nil {
		cerr := raw.Control(func(fd uintptr) {
			err = syscall.Sendmsg(int(fd), []byte("BARRIER=1"), syscall.UnixRights(p[1]), nil, 0)
		})
		err = errors.Join(err, cerr)
	}
	syscall.Close(p[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "testapp: notify: barrier: %v\n", err)
		return 1
	}
	syscall.SetNonblock(p[0], true) // then the deadline below works
	r := os.NewFile(uintptr(p[0]), "barrier")
	defer r.Close()
	r.SetReadDeadline(time.Now().Add(10 * time.Second)) // a pipe supports deadlines
	if _, err := r.Read(make([]byte, 1)); err != io.EOF {
		fmt.Fprintf(os.Stderr, "testapp: notify: barrier not released: %v\n", err)
		return 1
	}
	return 0
}

func healthcheck(port string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/healthz")
	if err != nil {
		return 1
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// get prints the body of one GET, for tests that need a client inside a
// FROM-scratch container; it exits 1 on any failure or non-2xx status.
func get(url string) int {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp get:", err)
		return 1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	os.Stdout.Write(b)
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "testapp get: status", resp.Status)
		return 1
	}
	return 0
}

// fill writes n pseudo-random bytes to path and syncs it, for volume
// tests that need a known data set written from inside a FROM-scratch
// container; it exits 1 on any failure (a full disk or quota included).
func fill(path, n string) int {
	size, err := strconv.ParseInt(n, 10, 64)
	if err != nil || size < 0 {
		fmt.Fprintf(os.Stderr, "testapp fill: %q is not a byte count\n", n)
		return 1
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp fill:", err)
		return 1
	}
	r := rand.New(rand.NewPCG(uint64(size), 19))
	buf := make([]byte, 1<<20)
	for size > 0 {
		for i := 0; i < len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], r.Uint64())
		}
		k := min(int64(len(buf)), size)
		if _, err := f.Write(buf[:k]); err != nil {
			fmt.Fprintln(os.Stderr, "testapp fill:", err)
			return 1
		}
		size -= k
	}
	if err := f.Sync(); err != nil {
		fmt.Fprintln(os.Stderr, "testapp fill:", err)
		return 1
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "testapp fill:", err)
		return 1
	}
	return 0
}

func duration(name string) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		fatal("%s: %q is not a duration like 3s", name, s)
	}
	return d
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) // client went away
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testapp: "+format+"\n", args...)
	os.Exit(2)
}

// proxy is the reverse proxy PROXY_CONFIG describes, read once at start.
func proxy(path string) http.Handler {
	b, err := os.ReadFile(path)
	if err != nil {
		fatal("proxy config: %v", err)
	}
	var upstream *url.URL
	name := ""
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch k {
		case "upstream":
			if upstream, err = url.Parse(strings.TrimSpace(v)); err != nil {
				fatal("proxy config: upstream: %v", err)
			}
		case "name":
			name = strings.TrimSpace(v)
		}
	}
	if upstream == nil {
		fatal("proxy config %s: no upstream line", path)
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.ModifyResponse = func(r *http.Response) error {
		r.Header.Set("X-Proxy-Name", name)
		return nil
	}
	return rp
}

// appendSynced appends text to path and syncs it to disk: an answer means
// the line is on the volume.
func appendSynced(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
