//go:build linux

package mesh

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	benchBytes = 64 << 20 // per throughput sample
	benchRTTs  = 1000     // per latency sample
)

// BenchmarkMeshVsVeth measures TCP throughput and round-trip latency from
// namespace A to B over the userspace WireGuard tunnel and over the plain
// veth underneath it, in the same run, and reports tunnel ÷ veth. Run with
// -benchtime=1x or 3x: each iteration moves 64 MiB per path.
func BenchmarkMeshVsVeth(b *testing.B) {
	l := newLab(b)
	a, peer := l.startPair(2 * time.Second)
	waitHandshake(b, a, 15*time.Second)
	tunnel := peer.hello.Gateway
	veth := l.vethB

	var tput, rtt [2]time.Duration
	b.ResetTimer()
	for range b.N {
		for i, dst := range []netip.Addr{tunnel, veth} {
			tput[i] += throughput(b, l.nsA, netip.AddrPortFrom(dst, sinkPort))
			rtt[i] += latency(b, l.nsA, netip.AddrPortFrom(dst, echoPort))
		}
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(benchBytes*b.N) / d.Seconds() / 1e6 }
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(benchRTTs*b.N) }
	b.ReportMetric(mbps(tput[0]), "tunnel-MB/s")
	b.ReportMetric(mbps(tput[1]), "veth-MB/s")
	b.ReportMetric(mbps(tput[0])/mbps(tput[1]), "tput-ratio")
	b.ReportMetric(us(rtt[0]), "tunnel-rtt-µs")
	b.ReportMetric(us(rtt[1]), "veth-rtt-µs")
	b.ReportMetric(us(rtt[0])/us(rtt[1]), "rtt-ratio")
	fmt.Printf("mesh vs veth: throughput %.0f / %.0f MB/s (ratio %.2f), rtt %.1f / %.1f µs (ratio %.2f)\n",
		mbps(tput[0]), mbps(tput[1]), mbps(tput[0])/mbps(tput[1]), us(rtt[0]), us(rtt[1]), us(rtt[0])/us(rtt[1]))
}

// throughput sends benchBytes to the sink and waits for its byte count, so
// the time covers delivery, not just local buffering.
func throughput(b *testing.B, ns string, dst netip.AddrPort) time.Duration {
	c, err := dialIn(ns, "tcp", dst.String())
	if err != nil {
		b.Fatalf("dial %v: %v", dst, err)
	}
	defer c.Close()
	buf := make([]byte, 256<<10)
	start := time.Now()
	for sent := 0; sent < benchBytes; sent += len(buf) {
		if _, err := c.Write(buf); err != nil {
			b.Fatalf("write %v: %v", dst, err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	d := time.Since(start)
	if n, _ := strconv.Atoi(strings.TrimSpace(line)); err != nil || n != benchBytes {
		b.Fatalf("sink %v got %q: %v", dst, line, err)
	}
	return d
}

// latency times benchRTTs sequential 64-byte echoes on one connection.
func latency(b *testing.B, ns string, dst netip.AddrPort) time.Duration {
	c, err := dialIn(ns, "tcp", dst.String())
	if err != nil {
		b.Fatalf("dial %v: %v", dst, err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	msg := make([]byte, 64)
	got := make([]byte, 64)
	start := time.Now()
	for range benchRTTs {
		if _, err := c.Write(msg); err != nil {
			b.Fatalf("echo %v: %v", dst, err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			b.Fatalf("echo %v: %v", dst, err)
		}
	}
	return time.Since(start)
}
