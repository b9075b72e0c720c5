package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkVMMesh measures TCP throughput and ping latency between two VM
// Machines over kernel WireGuard, over wireguard-go (the module refused,
// so ployzd falls back) and over their plain network, in one run, and
// reports the ratios (issue 18). TCG emulation makes absolute figures
// meaningless; the ratios are what to read.
func BenchmarkVMMesh(b *testing.B) {
	needVMLab(b)
	l := lab.ForTestVM(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	op := newVMOperator(b, l)
	var in rpc.Inspection
	op.json(b, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")
	meshIP := strings.TrimSuffix(in.Subnet, "0/24") + "1"
	if _, err := l.Exec(ctx, "m2", "docker", "run", "-d", "--restart", "always", "--network", "host", lab.TestAppImage); err != nil {
		b.Fatal(err)
	}
	labIP := l.Machines[1].IP.String()
	measure := func(ip string) (mbs, rtt float64) {
		var err error
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
			if mbs, err = vmSpeed(ctx, l, ip); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("m1 does not reach %s: %v", ip, err)
			}
		}
		rtt, err = vmRTT(ctx, l, ip)
		if err != nil {
			b.Fatal(err)
		}
		return mbs, rtt
	}
	b.ResetTimer()
	var kMB, uMB, pMB, kRTT, uRTT, pRTT float64
	for range b.N {
		mb, rtt := measure(meshIP)
		kMB, kRTT = kMB+mb, kRTT+rtt
		mb, rtt = measure(labIP)
		pMB, pRTT = pMB+mb, pRTT+rtt
	}
	b.StopTimer()
	// The same VMs on wireguard-go: the module refused, the link removed,
	// ployzd restarted (it falls back on its own).
	for _, m := range l.Machines {
		if _, err := l.Exec(ctx, m.Name, "sh", "-c", "echo 'install wireguard /bin/false' > /etc/modprobe.d/ployz-bench.conf && systemctl stop ployz && ip link del ployz-wg && rmmod wireguard && systemctl start ployz"); err != nil {
			b.Fatal(err)
		}
	}
	for _, m := range l.Machines {
		if out, _ := l.Exec(ctx, m.Name, "ip", "-d", "link", "show", "ployz-wg"); strings.Contains(out, "wireguard") {
			b.Fatalf("%s still on kernel WireGuard: %s", m.Name, out)
		}
	}
	b.StartTimer()
	for range b.N {
		mb, rtt := measure(meshIP)
		uMB, uRTT = uMB+mb, uRTT+rtt
	}
	n := float64(b.N)
	b.ReportMetric(kMB/n, "kernel-MB/s")
	b.ReportMetric(uMB/n, "userspace-MB/s")
	b.ReportMetric(pMB/n, "plain-MB/s")
	b.ReportMetric(kMB/uMB, "kernel/userspace-throughput")
	b.ReportMetric(kMB/pMB, "kernel/plain-throughput")
	b.ReportMetric(kRTT/n, "kernel-rtt-ms")
	b.ReportMetric(uRTT/n, "userspace-rtt-ms")
	b.ReportMetric(pRTT/n, "plain-rtt-ms")
	b.Logf("TCG VMs: kernel WG %.1f MB/s, wireguard-go %.1f MB/s, plain %.1f MB/s (kernel/userspace %.2fx, kernel/plain %.2f); rtt %.2f / %.2f / %.2f ms",
		kMB/n, uMB/n, pMB/n, kMB/uMB, kMB/pMB, kRTT/n, uRTT/n, pRTT/n)
}

// vmSpeed downloads 20 MiB from the testapp at ip on m1 (TCG is slow).
func vmSpeed(ctx context.Context, l *lab.Lab, ip string) (float64, error) {
	const size = 20 << 20
	out, err := l.Exec(ctx, "m1", "curl", "-s", "--max-time", "120", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}", "http://"+ip+":8080/bytes?n="+strconv.Itoa(size))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != strconv.Itoa(size) {
		return 0, fmt.Errorf("download from %s: %q, want %d bytes", ip, out, size)
	}
	v, _ := strconv.ParseFloat(f[1], 64)
	return v / (1 << 20), nil
}

func vmRTT(ctx context.Context, l *lab.Lab, ip string) (float64, error) {
	out, err := l.Exec(ctx, "m1", "ping", "-q", "-c", "20", "-i", "0.05", ip)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`= [\d.]+/([\d.]+)/`).FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("ping output %q", out)
	}
	return strconv.ParseFloat(m[1], 64)
}
