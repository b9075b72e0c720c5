package dns

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	miekg "github.com/miekg/dns"

	"github.com/ployz/ployz/internal/prereq"
)

// The side-by-side benchmark: ployz-dns's query servers and dnsmasq
// serve the same 200 names (3 addresses each) on loopback, each pinned
// to CPU 0, while dnsperf, pinned to CPU 1, loads them one after the
// other in the same run. It prints ratios and never fails on a number.
//
//	go test -run '^$' -bench BenchmarkDNSVsDnsmasq -benchtime 1x ./plugins/dns/internal/dns/
//
// Needs dnsperf, dnsmasq and taskset (apt-get install dnsperf dnsmasq-base);
// skipped without them.

// benchServeEnv makes the test binary a DNS server for the benchmark:
// "<mode> <addr>", mode "hot" (the production servers), "single" (the
// same, one query per system call) or "miekg" (a plain miekg server over
// the same Handler, the path before the hot one).
const benchServeEnv = "PLOYZ_DNS_BENCH_SERVE"

func TestBenchServeHelper(t *testing.T) {
	spec := os.Getenv(benchServeEnv)
	if spec == "" {
		prereq.Skip(t, "the entry point of the server process BenchmarkDNSVsDnsmasq starts")
	}
	mode, addr, _ := strings.Cut(spec, " ")
	h := NewHandler(testCfg(t), nil)
	h.SetTable(NewTable(testMachines, benchRows()))
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "miekg":
		srv := &miekg.Server{PacketConn: pc, Handler: h, UDPSize: 4096}
		go srv.ActivateAndServe()
	case "single":
		qs := newQueryServers(&Sockets{UDP: pc, TCP: ln}, h)
		qs.servers[0].(*udpServer).batch = 1
		qs.start()
	default:
		newQueryServers(&Sockets{UDP: pc, TCP: ln}, h).start()
	}
	fmt.Println("serving")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark closes stdin
}

type perfResult struct {
	qps      float64
	lost     int
	sent     int
	avg, p99 time.Duration
}

func (r perfResult) load() string {
	return fmt.Sprintf("%6.0f qps, avg %s, lost %d of %d", r.qps, r.avg.Round(time.Microsecond), r.lost, r.sent)
}

func (r perfResult) latency() string {
	return fmt.Sprintf("avg %s, p99 %s, lost %d of %d", r.avg.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.lost, r.sent)
}

var (
	perfQPS  = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	perfLost = regexp.MustCompile(`Queries lost:\s+([0-9]+)`)
	perfSent = regexp.MustCompile(`Queries sent:\s+([0-9]+)`)
	perfAvg  = regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)
)

// dnsperf runs dnsperf pinned to CPU 1; -v gives each answer's latency.
func dnsperf(b *testing.B, addr, queries string, args ...string) perfResult {
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("taskset", append([]string{"-c", "1", "dnsperf", "-s", host, "-p", port, "-d", queries}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("dnsperf: %v\n%s", err, out)
	}
	var r perfResult
	num := func(re *regexp.Regexp) float64 {
		m := re.FindSubmatch(out)
		if m == nil {
			b.Fatalf("dnsperf output without %s:\n%s", re, out)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	r.qps, r.lost, r.sent = num(perfQPS), int(num(perfLost)), int(num(perfSent))
	r.avg = time.Duration(num(perfAvg) * float64(time.Second))
	var lat []time.Duration
	for _, line := range bytes.Split(out, []byte("\n")) {
		if f := strings.Fields(string(line)); len(f) == 5 && f[0] == ">" {
			if v, err := strconv.ParseFloat(f[4], 64); err == nil {
				lat = append(lat, time.Duration(v*float64(time.Second)))
			}
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p99 = lat[len(lat)*99/100]
	}
	return r
}

// pinned starts a server process pinned to CPU 0 and waits until addr answers.
func pinned(b *testing.B, addr string, name string, args []string, env ...string) {
	cmd := exec.Command("taskset", append([]string{"-c", "0", name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdin, _ := cmd.StdinPipe()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	m := new(miekg.Msg)
	m.SetQuestion("svc1.demo-prod.internal.", miekg.TypeA)
	for end := time.Now().Add(10 * time.Second); ; {
		if r, _, err := (&miekg.Client{Timeout: 200 * time.Millisecond}).Exchange(m, addr); err == nil && len(r.Answer) == 3 {
			return
		}
		if time.Now().After(end) {
			b.Fatalf("%s on %s never answered:\n%s", name, addr, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func BenchmarkDNSVsDnsmasq(b *testing.B) {
	for _, tool := range []string{"dnsperf", "dnsmasq", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			// dnsperf and dnsmasq are the yardstick, not Ployz's:
			// packaging installs neither, so a host without them skips
			// on purpose.
			prereq.Skip(b, tool+" not installed: a comparison against dnsmasq (apt-get install dnsperf dnsmasq-base)")
		}
	}
	dir, err := os.MkdirTemp("", "ployz-dnsperf")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	var hosts, queries strings.Builder
	for _, r := range benchRows() {
		fmt.Fprintf(&hosts, "%s %s.%s.internal\n", r.Body.IP, r.Body.Service, r.Body.Namespace)
	}
	for s := range 200 {
		fmt.Fprintf(&queries, "svc%d.demo-prod.internal A\n", s)
	}
	hostsFile, queryFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "queries")
	os.WriteFile(hostsFile, []byte(hosts.String()), 0o644)
	os.WriteFile(queryFile, []byte(queries.String()), 0o644)
	os.Chmod(dir, 0o755) // dnsmasq reads it as nobody

	self, _ := os.Executable()
	servers := []struct {
		name string
		addr string
		run  func(addr string)
	}{
		{"ployz-dns", freeAddr(b, "udp4"), func(addr string) {
			pinned(b, addr, self, []string{"-test.run=^TestBenchServeHelper$"}, benchServeEnv+"=hot "+addr)
		}},
		{"ployz-dns, one query per call", freeAddr(b, "udp4"), func(addr string) {
			pinned(b, addr, self, []string{"-test.run=^TestBenchServeHelper$"}, benchServeEnv+"=single "+addr)
		}},
		{"ployz-dns, miekg path (before)", freeAddr(b, "udp4"), func(addr string) {
			pinned(b, addr, self, []string{"-test.run=^TestBenchServeHelper$"}, benchServeEnv+"=miekg "+addr)
		}},
		{"dnsmasq", freeAddr(b, "udp4"), func(addr string) {
			host, port, _ := net.SplitHostPort(addr)
			pinned(b, addr, "dnsmasq", []string{"-k", "--port=" + port, "--listen-address=" + host, "--bind-interfaces",
				"--no-resolv", "--no-hosts", "--addn-hosts=" + hostsFile, "--cache-size=0", "--pid-file=", "--log-facility=-"})
		}},
	}
	for _, s := range servers {
		s.run(s.addr)
	}
	// -b: dnsperf's own socket buffers, so its drops are not counted
	// against the server.
	load := []string{"-c", "4", "-q", "200", "-l", "10", "-b", "4096"}
	lat := []string{"-c", "4", "-q", "200", "-Q", "10000", "-l", "5", "-b", "4096", "-v"}
	res := map[string][2]perfResult{}
	for _, s := range servers {
		res[s.name] = [2]perfResult{dnsperf(b, s.addr, queryFile, load...), dnsperf(b, s.addr, queryFile, lat...)}
	}
	fmt.Printf("DNS, dnsperf %s (throughput) and %s (latency); servers on CPU 0, dnsperf on CPU 1:\n", strings.Join(load, " "), strings.Join(lat, " "))
	dm := res["dnsmasq"]
	for _, s := range servers {
		r := res[s.name]
		fmt.Printf("  %-30s full load: %s | at 10k qps: %s | %.2fx dnsmasq's qps, %.2fx its p99\n", s.name, r[0].load(), r[1].latency(),
			r[0].qps/dm[0].qps, float64(r[1].p99)/float64(max(dm[1].p99, 1)))
	}
	me := res["ployz-dns"]
	b.ReportMetric(me[0].qps/dm[0].qps, "x-dnsmasq-qps")
	b.ReportMetric(float64(me[1].p99.Microseconds()), "p99-µs")
	b.ReportMetric(float64(me[0].lost+me[1].lost), "lost")
}
