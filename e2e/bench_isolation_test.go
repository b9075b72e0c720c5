package e2e

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkIsolation measures what namespace isolation costs (issue 45):
// TCP throughput and ping latency from a Container on m1 to one of its
// namespace on m2, in the same run with isolation on and off (off: a
// RETURN put first in PLOYZ-ISOLATE on both Machines, so packets skip
// every rule), alternating legs; and how long after a Container starts
// every Machine's rules hold its address (a deploy of six replicas,
// polled every 50 ms on each Machine).
func BenchmarkIsolation(b *testing.B) {
	needLab(b)
	l := lab.ForTest(b, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	op := newOperator(b, l)
	formCluster(b, l, op)
	if doc, errs, code := deployFile(b, op, isolationProject("bench", "m1", "m2", "bench-db")); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		b.Fatalf("deploy: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	web, db := isoContainerOf(b, op, "bench", "web"), isoContainerOf(b, op, "bench", "db")
	pid, err := l.Exec(ctx, "m1", "docker", "inspect", "-f", "{{.State.Pid}}", web.id)
	if err != nil {
		b.Fatal(err)
	}
	inWeb := []string{"nsenter", "-t", strings.TrimSpace(pid), "-n"}
	leg := isolationLeg{l: l, ctx: ctx, inWeb: inWeb, dst: db.ip}

	b.ResetTimer()
	var on, off legResult
	for range b.N {
		for range 3 {
			on.add(leg.run(b, false))
			off.add(leg.run(b, true))
		}
	}
	b.StopTimer()
	b.ReportMetric(on.mbps(), "on-MB/s")
	b.ReportMetric(off.mbps(), "off-MB/s")
	b.ReportMetric(on.mbps()/off.mbps(), "throughput-ratio")
	b.ReportMetric(on.p50(), "on-p50-ms")
	b.ReportMetric(off.p50(), "off-p50-ms")
	b.ReportMetric(on.p99(), "on-p99-ms")
	b.ReportMetric(off.p99(), "off-p99-ms")
	b.Logf("isolation on %.0f MB/s, ping p50 %.3f p99 %.3f ms; off %.0f MB/s, p50 %.3f p99 %.3f ms; throughput %.2fx, p50 %.2fx, p99 %.2fx",
		on.mbps(), on.p50(), on.p99(), off.mbps(), off.p50(), off.p99(), on.mbps()/off.mbps(), on.p50()/off.p50(), on.p99()/off.p99())

	upd := ruleUpdate(b, ctx, l, op)
	b.ReportMetric(upd.p50, "rules-p50-ms")
	b.ReportMetric(upd.p99, "rules-p99-ms")
	b.Logf("rules on every Machine after a Container started: p50 %.0f ms, p99 %.0f ms over %d (Container, Machine) pairs (50 ms polling)", upd.p50, upd.p99, upd.n)
}

// isolationLeg downloads and pings from web's network namespace to dst.
type isolationLeg struct {
	l     *lab.Lab
	ctx   context.Context
	inWeb []string
	dst   string
}

// offMark is the comment on the RETURN that turns isolation off.
const offMark = "ployz-bench-isolation-off"

// toggle puts the RETURN first in PLOYZ-ISOLATE on both Machines (off)
// or deletes it; present reports whether every Machine still holds it
// (the daemon rewrites the chain every 30 s and on every change).
func (g isolationLeg) toggle(b *testing.B, op string) (present bool) {
	present = true
	for _, m := range g.l.Machines {
		out, err := g.l.Exec(g.ctx, m.Name, "sh", "-c", `for x in iptables-nft iptables-legacy; do $x -w 5 -S PLOYZ-ISOLATE >/dev/null 2>&1 || continue; `+
			`case `+op+` in on) $x -w 5 -I PLOYZ-ISOLATE 1 -m comment --comment `+offMark+` -j RETURN;; `+
			`off) while $x -w 5 -D PLOYZ-ISOLATE -m comment --comment `+offMark+` -j RETURN 2>/dev/null; do :; done;; `+
			`check) $x -w 5 -C PLOYZ-ISOLATE -m comment --comment `+offMark+` -j RETURN || echo missing;; esac; done`)
		if err != nil {
			b.Fatalf("%s %s: %v\n%s", op, m.Name, err, out)
		}
		present = present && !strings.Contains(out, "missing")
	}
	return present
}

// run measures one leg; with off, isolation is bypassed, and a leg the
// daemon's rewrite cut short is measured again.
func (g isolationLeg) run(b *testing.B, off bool) legResult {
	for attempt := 0; ; attempt++ {
		if off {
			g.toggle(b, "on")
		}
		r := g.measure(b)
		if !off {
			return r
		}
		held := g.toggle(b, "check")
		g.toggle(b, "off")
		if held || attempt == 2 {
			return r
		}
	}
}

func (g isolationLeg) measure(b *testing.B) legResult {
	const size = 100 << 20
	out, err := g.l.Exec(g.ctx, "m1", append(g.inWeb, "curl", "-s", "-o", "/dev/null", "-w", "%{size_download} %{speed_download}",
		"http://"+g.dst+":8080/bytes?n="+strconv.Itoa(size))...)
	f := strings.Fields(out)
	if err != nil || len(f) != 2 || f[0] != strconv.Itoa(size) {
		b.Fatalf("download from %s: %q, %v", g.dst, out, err)
	}
	speed, _ := strconv.ParseFloat(f[1], 64)
	out, err = g.l.Exec(g.ctx, "m1", append(g.inWeb, "ping", "-c", "200", "-i", "0.01", g.dst)...)
	if err != nil {
		b.Fatalf("ping %s: %v\n%s", g.dst, err, out)
	}
	var rtts []float64
	for _, m := range regexp.MustCompile(`time=([\d.]+) ms`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, v)
	}
	return legResult{mb: speed / (1 << 20), legs: 1, rtts: rtts}
}

// legResult sums legs: MB/s per leg and every ping time.
type legResult struct {
	mb   float64
	legs int
	rtts []float64
}

func (r *legResult) add(o legResult) {
	r.mb += o.mb
	r.legs += o.legs
	r.rtts = append(r.rtts, o.rtts...)
}

func (r legResult) mbps() float64 { return r.mb / float64(r.legs) }
func (r legResult) p50() float64  { return percentile(r.rtts, 0.5) }
func (r legResult) p99() float64  { return percentile(r.rtts, 0.99) }

// percentile is the q-quantile of vs (nearest rank).
func percentile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(q*float64(len(s))))-1)]
}

// updateResult is the delay from a Container's start to its address in
// a Machine's rules.
type updateResult struct {
	p50, p99 float64
	n        int
}

// ruleUpdate deploys six unpinned replicas while every Machine lists its
// PLOYZ-ISOLATE sources every 50 ms, and compares each new address's
// first sighting on each Machine with its Container's start.
func ruleUpdate(b *testing.B, ctx context.Context, l *lab.Lab, op *operator) updateResult {
	const poll = `end=$(($(date +%%s)+%d)); while [ $(date +%%s) -lt $end ]; do t=$(date +%%s.%%N); ` +
		`for x in iptables-nft iptables-legacy; do $x -w 5 -S PLOYZ-ISOLATE 2>/dev/null; done | sed -n "s|^-A PLOYZ-ISOLATE -s \([0-9.]*\)/32 -g .*|$t \1|p"; sleep 0.05; done`
	seen := map[string]map[string]float64{} // Machine → address → first seen (unix s)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range l.Machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := l.Exec(ctx, m.Name, "sh", "-c", fmt.Sprintf(poll, 90))
			if err != nil {
				b.Errorf("poll %s: %v", m.Name, err)
			}
			first := map[string]float64{}
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) == 2 {
					if _, ok := first[f[1]]; !ok {
						first[f[1]], _ = strconv.ParseFloat(f[0], 64)
					}
				}
			}
			mu.Lock()
			seen[m.Name] = first
			mu.Unlock()
		}()
	}
	time.Sleep(3 * time.Second) // every poll loop has listed the chain once
	const project = "name: upd\nservices:\n  u:\n    image: " + lab.TestAppImage + "\n    deploy: {replicas: 6}\n"
	if doc, errs, code := deployFile(b, op, project); code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		b.Fatalf("deploy upd: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
	}
	wg.Wait()
	var delays []float64
	for _, c := range ps(b, op, "upd").Containers {
		out, err := l.Exec(ctx, c.Machine, "docker", "inspect", "-f", "{{.State.StartedAt}}", c.ID)
		if err != nil {
			b.Fatal(err)
		}
		started, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(out))
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range l.Machines {
			at, ok := seen[m.Name][c.IP]
			if !ok {
				b.Errorf("%s never held %s (%s) within the poll", m.Name, c.IP, c.ID)
				continue
			}
			delays = append(delays, max(0, (at-float64(started.UnixNano())/1e9)*1000))
		}
	}
	return updateResult{p50: percentile(delays, 0.5), p99: percentile(delays, 0.99), n: len(delays)}
}
