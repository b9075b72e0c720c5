package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy" // stock Caddy's reverse_proxy

	"github.com/ployz/ployz/internal/prereq"
)

// BenchmarkIngressVsNginx loads the Ingress Proxy, nginx and stock Caddy
// side by side in the same run, as a user comparing them would: each
// proxy its own process pinned to CPU 0 (taskset), the same upstream
// process and wrk (no retries, keep-alive, 16 connections) pinned to
// CPU 1, HTTP and HTTPS (TLS terminated by the proxy, plain HTTP to the
// upstream, nginx with a keepalive upstream pool). Each round loads the
// proxies in the order nginx, stock, ployz, ployz, stock, nginx, so drift
// falls on all alike. Ratios are ployz ÷ nginx and ployz ÷ stock; it
// never gates CI.
//
//	go test -run '^$' -bench IngressVsNginx -benchtime 2x ./plugins/ingress-caddy/internal/proxy/
//
// Needs root (wrk runs in its own mount namespace), nginx, wrk and
// taskset (apt-get install nginx-light wrk); skipped without them.
func BenchmarkIngressVsNginx(b *testing.B) {
	for _, tool := range []string{"nginx", "wrk", "taskset", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			// nginx and wrk are the yardstick, not Ployz's: packaging
			// installs neither, so a host without them skips on purpose.
			prereq.Skip(b, tool+" not installed: a comparison against nginx (apt-get install nginx-light wrk)")
		}
	}
	if os.Geteuid() != 0 {
		prereq.Root(b, "wrk runs in its own mount namespace")
	}
	b.Run("HTTP", func(b *testing.B) { benchVsNginx(b, false) })
	b.Run("HTTPS", func(b *testing.B) { benchVsNginx(b, true) })
}

// benchProxyEnv makes the test binary one process of the benchmark:
// "upstream ADDR" (the upstream), "ployz UPSTREAM DIR" (the Ingress
// Proxy; with DIR/cert.pem HTTPS too), "stock UPSTREAM DIR" (stock
// Caddy, static reverse_proxy config) or "bare UPSTREAM" (no Caddy: the
// standard library's ReverseProxy on net/http, HTTP only, the floor of
// any proxy built on net/http; for profiling by hand). A proxy prints "listen ADDR
// [TLSADDR]" once it answers, then runs until its stdin closes.
const benchProxyEnv = "PLOYZ_INGRESS_BENCH_SERVE"

func TestBenchProxyHelper(t *testing.T) {
	spec := os.Getenv(benchProxyEnv)
	if spec == "" {
		prereq.Skip(t, "the entry point of a process BenchmarkIngressVsNginx starts")
	}
	f := strings.Fields(spec)
	defer benchProfile(t, f[0])()
	switch f[0] {
	case "upstream":
		go http.ListenAndServe(f[1], benchHandler())
	case "ployz":
		tuneGC() // as serve runs it
		var tb *benchTLS
		if certPEM, err := os.ReadFile(filepath.Join(f[2], "cert.pem")); err == nil {
			keyPEM, _ := os.ReadFile(filepath.Join(f[2], "key.pem"))
			tb = &benchTLS{certPEM, keyPEM, &tls.Config{RootCAs: certPool(t, certPEM), ServerName: benchHost, NextProtos: []string{"http/1.1"}}}
		}
		addr, stop := serveBenchProxy(t, f[1], tb)
		defer stop()
		if tb != nil {
			fmt.Printf("listen - %s\n", addr)
		} else {
			fmt.Printf("listen %s -\n", addr)
		}
	case "bare":
		u, _ := url.Parse("http://" + f[1])
		rp := httputil.NewSingleHostReverseProxy(u)
		rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
		a := freePort(t)
		go http.ListenAndServe(a, rp)
		time.Sleep(200 * time.Millisecond)
		fmt.Printf("listen %s -\n", a)
	case "stock":
		plain, tlsAddr := stockCaddy(t, f[1], f[2])
		defer caddy.Stop()
		fmt.Printf("listen %s %s\n", plain, tlsAddr)
	}
	if f[0] == "upstream" {
		fmt.Printf("listen %s -\n", f[1])
	}
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
}

// benchProfileEnv names a directory: each proxy process of the benchmark
// writes its CPU profile there (KIND.cpu.pprof), its allocation profile
// (KIND.allocs.pprof) and its allocation count (KIND.allocs), for
// `go tool pprof` after a run.
const benchProfileEnv = "PLOYZ_INGRESS_BENCH_PROFILE"

// benchProfile starts kind's CPU profile when benchProfileEnv is set;
// the returned func stops it and writes the allocation count.
func benchProfile(t *testing.T, kind string) func() {
	dir := os.Getenv(benchProfileEnv)
	if dir == "" || kind == "upstream" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, kind+".cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		if a, err := os.Create(filepath.Join(dir, kind+".allocs.pprof")); err == nil {
			pprof.Lookup("allocs").WriteTo(a, 0)
			a.Close()
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		out := fmt.Sprintf("mallocs %d bytes %d gc %d\n", after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc, after.NumGC-before.NumGC)
		os.WriteFile(filepath.Join(dir, kind+".allocs"), []byte(out), 0o644)
	}
}

// stockCaddy loads a stock Caddy config proxying benchHost to upstream:
// a host matcher and reverse_proxy, on HTTP and (with dir/cert.pem) on
// HTTPS from the loaded certificate.
func stockCaddy(t testing.TB, upstream, dir string) (plain, tlsAddr string) {
	route := []any{map[string]any{
		"match":    []any{map[string]any{"host": []string{benchHost}}},
		"handle":   []any{map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": upstream}}}},
		"terminal": true,
	}}
	plain, tlsAddr = freePort(t), "-"
	servers := map[string]any{"plain": map[string]any{"listen": []string{plain}, "routes": route, "automatic_https": map[string]any{"disable": true}}}
	apps := map[string]any{"http": map[string]any{"servers": servers}}
	if certPEM, err := os.ReadFile(filepath.Join(dir, "cert.pem")); err == nil {
		keyPEM, _ := os.ReadFile(filepath.Join(dir, "key.pem"))
		tlsAddr = freePort(t)
		servers["tls"] = map[string]any{"listen": []string{tlsAddr}, "routes": route, "automatic_https": map[string]any{"disable": true},
			"tls_connection_policies": []any{map[string]any{}}}
		apps["tls"] = map[string]any{"certificates": map[string]any{"load_pem": []any{map[string]any{"certificate": string(certPEM), "key": string(keyPEM)}}},
			"disable_ocsp_stapling": true}
	}
	cfg, _ := json.Marshal(map[string]any{"apps": apps, "logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}}})
	if err := caddy.Load(cfg, false); err != nil {
		t.Fatal(err)
	}
	return plain, tlsAddr
}

// benchProc is one pinned process of the benchmark and the addresses it
// serves.
type benchProc struct {
	plain, tls string
	pid        int
}

// startPinned starts the test binary (or name) pinned to cpu, with env,
// and, for the test binary, waits for its "listen" line.
func startPinned(b *testing.B, cpu string, env string, name string, args ...string) benchProc {
	b.Helper()
	self := name == ""
	if self {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		name, args = exe, []string{"-test.run", "^TestBenchProxyHelper$"}
	}
	cmd := exec.Command("taskset", append([]string{"-c", cpu, name}, args...)...)
	cmd.Env = append(os.Environ(), env)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var errLog bytes.Buffer
	cmd.Stderr = &errLog
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	b.Cleanup(func() {
		stdin.Close()
		time.AfterFunc(5*time.Second, func() { _ = cmd.Process.Kill() })
		_ = cmd.Wait()
	})
	if !self {
		return benchProc{pid: cmd.Process.Pid} // taskset execs the command
	}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) == 3 && f[0] == "listen" {
			go io.Copy(io.Discard, stdout)
			return benchProc{plain: f[1], tls: f[2], pid: cmd.Process.Pid}
		}
	}
	b.Fatalf("%s never said where it listens:\n%s", env, errLog.String())
	return benchProc{}
}

// nginxConf is nginx as a user would put it in front of one upstream:
// one worker, a keepalive upstream pool, HTTP/1.1 to the upstream, no
// access log.
const nginxConf = `daemon off;
master_process off;
worker_processes 1;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path {{dir}}/body; proxy_temp_path {{dir}}/proxy;
  fastcgi_temp_path {{dir}}/fastcgi; uwsgi_temp_path {{dir}}/uwsgi; scgi_temp_path {{dir}}/scgi;
  upstream up { server {{upstream}}; keepalive 32; }
  server {
    listen {{plain}};
    listen {{tls}} ssl;
    server_name ` + benchHost + `;
    ssl_certificate {{dir}}/cert.pem;
    ssl_certificate_key {{dir}}/key.pem;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
    }
  }
}
`

func benchVsNginx(b *testing.B, https bool) {
	dir := b.TempDir()
	certPEM, keyPEM, _ := selfSigned(b, benchHost)
	if https {
		os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600)
		os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600)
	}
	upstream := startPinned(b, "1", benchProxyEnv+"=upstream "+freePort(b), "").plain
	ployz := startPinned(b, "0", benchProxyEnv+"=ployz "+upstream+" "+dir, "")
	stock := startPinned(b, "0", benchProxyEnv+"=stock "+upstream+" "+dir, "")
	ngx := nginxProc(b, dir, upstream, certPEM, keyPEM)
	scheme, pick := "http", func(p benchProc) string { return p.plain }
	if https {
		scheme, pick = "https", func(p benchProc) string { return p.tls }
	}
	targets := []struct {
		name string
		addr string
		pid  int
	}{{"nginx", pick(ngx), ngx.pid}, {"stock", pick(stock), stock.pid}, {"ployz", pick(ployz), ployz.pid}}
	for _, t := range targets { // warm-up: every connection open, every pool filled
		if _, err := runWrk(scheme, t.addr, time.Second); err != nil {
			b.Fatalf("%s warm-up: %v", t.name, err)
		}
	}
	results := map[string]*wrkResult{}
	b.ResetTimer()
	for range b.N {
		for _, i := range []int{0, 1, 2, 2, 1, 0} {
			cpu0 := procCPU(targets[i].pid)
			r, err := runWrk(scheme, targets[i].addr, 3*time.Second)
			if err != nil {
				b.Fatalf("%s: %v", targets[i].name, err)
			}
			r.cpu = procCPU(targets[i].pid) - cpu0
			results[targets[i].name] = results[targets[i].name].add(r)
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	for _, t := range targets {
		r := results[t.name]
		b.ReportMetric(r.rps(), t.name+"-req/s")
		b.ReportMetric(r.p99(), t.name+"-p99-µs")
		b.ReportMetric(r.cpuPerRequest(), t.name+"-cpu-µs/req")
	}
	p, n, s := results["ployz"], results["nginx"], results["stock"]
	b.ReportMetric(p.rps()/n.rps(), "req/s-vs-nginx")
	b.ReportMetric(p.p99()/n.p99(), "p99-vs-nginx")
	b.ReportMetric(p.rps()/s.rps(), "req/s-vs-stock")
	b.ReportMetric(p.cpuPerRequest()/n.cpuPerRequest(), "cpu/req-vs-nginx")
	b.ReportMetric(p.cpuPerRequest()/s.cpuPerRequest(), "cpu/req-vs-stock")
	b.Logf("%s, wrk -t1 -c16 on CPU 1, each proxy on CPU 0: ployz %.0f req/s p99 %.0f µs; nginx %.0f req/s p99 %.0f µs; stock Caddy %.0f req/s p99 %.0f µs; ployz÷nginx %.2f× req/s, %.2f× p99; ployz÷stock %.2f× req/s, %.2f× p99; errors ployz %d nginx %d stock %d",
		strings.ToUpper(scheme), p.rps(), p.p99(), n.rps(), n.p99(), s.rps(), s.p99(), p.rps()/n.rps(), p.p99()/n.p99(), p.rps()/s.rps(), p.p99()/s.p99(), p.errors, n.errors, s.errors)
	b.Logf("%s CPU per request (each proxy's user+system time over its requests; holds on a busy host, where req/s follows the scheduler): ployz %.1f µs, nginx %.1f µs, stock Caddy %.1f µs; ployz÷nginx %.2f×, ployz÷stock %.2f×",
		strings.ToUpper(scheme), p.cpuPerRequest(), n.cpuPerRequest(), s.cpuPerRequest(), p.cpuPerRequest()/n.cpuPerRequest(), p.cpuPerRequest()/s.cpuPerRequest())
}

// nginxProc writes nginx's config for upstream into dir and starts it
// pinned to CPU 0 on two free ports, waiting until it answers.
func nginxProc(b *testing.B, dir, upstream string, certPEM, keyPEM []byte) benchProc {
	p := benchProc{plain: freePort(b), tls: freePort(b)}
	dir = filepath.Join(dir, "nginx") // its own: cert.pem in dir turns HTTPS on for the others
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600)
	conf := strings.NewReplacer("{{dir}}", dir, "{{upstream}}", upstream, "{{plain}}", p.plain, "{{tls}}", p.tls).Replace(nginxConf)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	p.pid = startPinned(b, "0", "", "nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", path).pid
	c := benchClient(nil)
	defer c.CloseIdleConnections()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := benchGet(c, benchRequest("http", p.plain)); err == nil {
			return p
		} else if time.Now().After(end) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx never answered: %v\n%s", err, log)
		}
	}
}

// wrkResult sums wrk runs of one proxy.
type wrkResult struct {
	requests float64
	seconds  float64
	p99s     []float64 // µs, one per run
	errors   int
	cpu      time.Duration // the proxy process's user+system time
}

func (r *wrkResult) add(o wrkResult) *wrkResult {
	if r == nil {
		r = &wrkResult{}
	}
	r.requests += o.requests
	r.seconds += o.seconds
	r.p99s = append(r.p99s, o.p99s...)
	r.errors += o.errors
	r.cpu += o.cpu
	return r
}

// cpuPerRequest is the proxy's CPU time per request in µs.
func (r *wrkResult) cpuPerRequest() float64 { return float64(r.cpu.Microseconds()) / r.requests }

// procCPU is the user+system time of process pid (all its threads), from
// /proc/PID/stat; 0 when unreadable.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): utime and
	// stime are the 12th and 13th, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func (r *wrkResult) rps() float64 { return r.requests / r.seconds }

// p99 is the mean of the runs' p99s (wrk reports a percentile per run).
func (r *wrkResult) p99() float64 {
	var sum float64
	for _, v := range r.p99s {
		sum += v
	}
	return sum / float64(len(r.p99s))
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m),`)
	wrkP99      = regexp.MustCompile(`(?m)^\s+99%\s+([\d.]+)(us|ms|s)\s*$`)
	wrkSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

// runWrk loads scheme://benchHost:port/ (port from addr, a loopback
// address) for d: wrk pinned to CPU 1, one thread, 16 keep-alive
// connections. A socket error or a non-2xx answer is counted, never
// retried. wrk runs in its own mount namespace whose /etc/hosts names
// benchHost, so it sends the hostname as SNI and Host, as a browser
// would (wrk has no --resolve).
func runWrk(scheme, addr string, d time.Duration) (wrkResult, error) {
	host, port, _ := strings.Cut(addr, ":")
	hosts := filepath.Join(os.TempDir(), "ployz-bench-hosts")
	if err := os.WriteFile(hosts, []byte(host+" "+benchHost+"\n"), 0o644); err != nil {
		return wrkResult{}, err
	}
	wrk := fmt.Sprintf("mount --bind %s /etc/hosts && exec taskset -c 1 wrk -t1 -c16 -d%ds --latency %s://%s:%s/",
		hosts, int(d.Seconds()), scheme, benchHost, port)
	out, err := exec.CommandContext(context.Background(), "unshare", "-m", "sh", "-c", wrk).CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	m, p := wrkRequests.FindSubmatch(out), wrkP99.FindSubmatch(out)
	if m == nil || p == nil {
		return wrkResult{}, fmt.Errorf("wrk printed no request count or p99:\n%s", out)
	}
	var r wrkResult
	r.requests, _ = strconv.ParseFloat(string(m[1]), 64)
	r.seconds = wrkDuration(m[2], m[3]) / 1e6
	r.p99s = []float64{wrkDuration(p[1], p[2])}
	if s := wrkSocket.FindSubmatch(out); s != nil {
		for _, n := range s[1:] {
			k, _ := strconv.Atoi(string(n))
			r.errors += k
		}
	}
	if s := wrkNon2xx.FindSubmatch(out); s != nil {
		k, _ := strconv.Atoi(string(s[1]))
		r.errors += k
	}
	if r.requests == 0 {
		return r, fmt.Errorf("wrk sent no request:\n%s", out)
	}
	return r, nil
}

// wrkDuration converts one of wrk's durations to µs.
func wrkDuration(v, unit []byte) float64 {
	f, _ := strconv.ParseFloat(string(v), 64)
	switch string(unit) {
	case "ms":
		return f * 1e3
	case "s":
		return f * 1e6
	case "m":
		return f * 60e6
	}
	return f
}
