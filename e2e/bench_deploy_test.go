package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkDeploy10x3 deploys 10 Services × 3 replicas on 3 Machines and
// compares its wall time, in the same run, with creating and starting the
// same 30 Containers with plain `docker run` on the same Machines, and with
// `docker stack deploy` of an equivalent stack on a Swarm formed from them
// (issue 6). Readiness is "none" everywhere so all three wait for the same
// thing: every Container running.
func BenchmarkDeploy10x3(b *testing.B) { benchDeploy(b, 10, 3) }

// BenchmarkDeploy50x2 is BenchmarkDeploy10x3 with 50 Services × 2
// replicas: many small Services, where per-Service work (pointer moves,
// dependencies) weighs more than per-Container work.
func BenchmarkDeploy50x2(b *testing.B) { benchDeploy(b, 50, 2) }

// deployBench is one lab with a Ployz Cluster and a Swarm on the same 3
// Machines.
type deployBench struct {
	b        *testing.B
	l        *lab.Lab
	ctx      context.Context
	op       *operator
	services int
	replicas int
}

func benchDeploy(b *testing.B, services, replicas int) {
	needLab(b)
	l := lab.ForTest(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	db := &deployBench{b: b, l: l, ctx: ctx, op: newOperator(b, l), services: services, replicas: replicas}
	db.setup()
	compose := db.compose()
	dir := b.TempDir()
	var ployzT, dockerT, swarmT, swarmHostT time.Duration
	b.ResetTimer()
	for i := range b.N {
		msg := fmt.Sprintf("run%d", i)
		f := filepath.Join(dir, "compose.yaml")
		os.WriteFile(f, []byte(strings.ReplaceAll(compose, "%s", msg)), 0o644)
		ployzT += db.ployz(f)
		dockerT += db.docker(i, msg)
		swarmT += db.swarm(strings.ReplaceAll(db.stack(swarmBridge), "%s", msg))
		swarmHostT += db.swarm(strings.ReplaceAll(db.stack("host"), "%s", msg))
	}
	n := float64(b.N)
	b.ReportMetric(ployzT.Seconds()/n, "ployz-s")
	b.ReportMetric(dockerT.Seconds()/n, "docker-s")
	b.ReportMetric(swarmT.Seconds()/n, "swarm-s")
	b.ReportMetric(swarmHostT.Seconds()/n, "swarm-host-s")
	b.ReportMetric(ployzT.Seconds()/dockerT.Seconds(), "ployz/docker")
	b.ReportMetric(ployzT.Seconds()/swarmT.Seconds(), "ployz/swarm")
	b.ReportMetric(ployzT.Seconds()/swarmHostT.Seconds(), "ployz/swarm-host")
	b.Logf("deploy %dx%d: ployz %.1fs, plain docker %.1fs (%.2fx), docker stack deploy on a bridge %.1fs (%.2fx), on the host network %.1fs (%.2fx)",
		services, replicas, ployzT.Seconds()/n, dockerT.Seconds()/n, ployzT.Seconds()/dockerT.Seconds(),
		swarmT.Seconds()/n, ployzT.Seconds()/swarmT.Seconds(), swarmHostT.Seconds()/n, ployzT.Seconds()/swarmHostT.Seconds())
}

// swarmBridge is the Swarm's own bridge network (scope swarm, driver
// bridge): every task gets a network namespace, a veth and iptables rules
// as a Ployz or plain `docker run` Container does, which Swarm's overlay
// would too but nested Machines cannot build. The host network is
// measured as well: it pays none of that.
const swarmBridge = "bench-bridge"

// setup forms the Ployz Cluster and a Swarm from the same Machines.
func (db *deployBench) setup() {
	b, l, op := db.b, db.l, db.op
	var in struct{}
	op.json(b, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[2].IP.String(), "--name", "m3")
	m1 := l.Machines[0]
	if _, err := l.Exec(db.ctx, "m1", "docker", "swarm", "init", "--advertise-addr", m1.IP.String()); err != nil {
		b.Fatal(err)
	}
	tok, err := l.Exec(db.ctx, "m1", "docker", "swarm", "join-token", "-q", "worker")
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range l.Machines[1:] {
		if _, err := l.Exec(db.ctx, m.Name, "docker", "swarm", "join", "--token", tok, m1.IP.String()+":2377"); err != nil {
			b.Fatal(err)
		}
	}
	if out, err := l.Exec(db.ctx, "m1", "docker", "network", "create", "--scope", "swarm", "--driver", "bridge", swarmBridge); err != nil {
		b.Fatalf("create the Swarm's bridge network: %v %s", err, out)
	}
}

// compose is the compose file; %s is each run's message, so every run
// replaces every Container.
func (db *deployBench) compose() string {
	var compose strings.Builder
	compose.WriteString("name: bench\nservices:\n")
	for i := range db.services {
		fmt.Fprintf(&compose, "  s%d:\n    image: %s\n    environment: {MESSAGE: \"%%s\"}\n    deploy: {replicas: %d}\n", i, lab.TestAppImage, db.replicas)
	}
	return compose.String()
}

// stack is the equivalent stack file on the named external network. One
// replica per node and a port per Service, so the host network works too;
// the ports start above what a Machine listens on itself (ployzd's
// metrics are on 9101, which left s1 crash-looping).
func (db *deployBench) stack(network string) string {
	var stack strings.Builder
	stack.WriteString("version: \"3.8\"\nservices:\n")
	for i := range db.services {
		fmt.Fprintf(&stack, "  s%d:\n    image: %s\n    environment: {MESSAGE: \"%%s\", PORT: \"%d\"}\n    deploy: {replicas: %d, placement: {max_replicas_per_node: 1}}\n    networks: [outside]\n",
			i, lab.TestAppImage, 19100+i, db.replicas)
	}
	fmt.Fprintf(&stack, "networks:\n  outside:\n    external: true\n    name: %s\n", network)
	return stack.String()
}

func (db *deployBench) total() int { return db.services * db.replicas }

func (db *deployBench) running(m, filter string) int {
	out, _ := db.l.Exec(db.ctx, m, "docker", "ps", "-q", "--filter", filter)
	return len(strings.Fields(out))
}

// waitAll waits until want Containers matching filter run on the
// Machines; it reports false after 5 minutes.
func (db *deployBench) waitAll(filter string, want int) bool {
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		n := 0
		for _, m := range db.l.Machines {
			n += db.running(m.Name, filter)
		}
		if n >= want {
			return true
		}
	}
	return false
}

// ployz deploys f, logs where the time went and removes the project.
func (db *deployBench) ployz(f string) time.Duration {
	start := time.Now()
	out := db.op.must(db.b, "deploy", "-f", f, "-y", "--json")
	took := time.Since(start)
	var res struct {
		Timings []deploy.Timing `json:"timings"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		db.b.Fatalf("deploy --json: %v", err)
	}
	db.b.Logf("ployz deploy %dx%d: %.1fs; %s", db.services, db.replicas, took.Seconds(), summarize(res.Timings))
	if dir := os.Getenv("PLOYZ_BENCH_TRACE"); dir != "" {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("deploy-%dx%d-%d.json", db.services, db.replicas, time.Now().Unix())), []byte(out), 0o644)
	}
	db.op.must(db.b, "project", "rm", "bench", "-y")
	return took
}

// summarize prints, per kind of span, how many ran, their total and
// longest time, and when the last one ended.
func summarize(ts []deploy.Timing) string {
	type agg struct {
		n             int
		sum, max, end float64
	}
	by := map[string]*agg{}
	var kinds []string
	for _, t := range ts {
		a := by[t.Kind]
		if a == nil {
			a = &agg{}
			by[t.Kind] = a
			kinds = append(kinds, t.Kind)
		}
		a.n++
		a.sum += t.DurationMS
		a.max = max(a.max, t.DurationMS)
		a.end = max(a.end, t.StartMS+t.DurationMS)
	}
	slices.SortFunc(kinds, func(x, y string) int { return int(by[x].end - by[y].end) })
	var parts []string
	for _, k := range kinds {
		a := by[k]
		parts = append(parts, fmt.Sprintf("%s n=%d sum=%.0fms max=%.0fms avg=%.0fms end=%.0fms", k, a.n, a.sum, a.max, a.sum/float64(a.n), a.end))
	}
	return strings.Join(parts, "; ")
}

// docker runs the same Containers with plain `docker run`, spread over
// the Machines round-robin, each Machine's one after the other.
func (db *deployBench) docker(run int, msg string) time.Duration {
	l := db.l
	start := time.Now()
	var wg sync.WaitGroup
	for k, m := range l.Machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := k; c < db.total(); c += len(l.Machines) {
				l.Exec(db.ctx, m.Name, "docker", "run", "-d", "--network", "ployz", "--label", "bench=plain",
					"--name", fmt.Sprintf("plain-%d-%s-%d", c, m.Name, run), "-e", "MESSAGE="+msg, lab.TestAppImage)
			}
		}()
	}
	wg.Wait()
	if !db.waitAll("label=bench=plain", db.total()) {
		db.b.Fatalf("plain docker: fewer than %d Containers running after 5 minutes", db.total())
	}
	took := time.Since(start)
	for _, m := range l.Machines {
		ids, _ := l.Exec(db.ctx, m.Name, "docker", "ps", "-aq", "--filter", "label=bench=plain")
		if ids != "" {
			l.Exec(db.ctx, m.Name, append([]string{"docker", "rm", "-f"}, strings.Fields(ids)...)...)
		}
	}
	return took
}

// swarm deploys the stack file and waits for every task running.
func (db *deployBench) swarm(stack string) time.Duration {
	l, b := db.l, db.b
	sf := "/root/stack.yml"
	if _, err := l.Exec(db.ctx, "m1", "sh", "-c", "cat > "+sf+" <<'EOF'\n"+stack+"EOF"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if out, err := l.Exec(db.ctx, "m1", "docker", "stack", "deploy", "-c", sf, "bench"); err != nil {
		b.Fatalf("stack deploy: %v %s", err, out)
	}
	if !db.waitAll("label=com.docker.stack.namespace=bench", db.total()) {
		// Say why, so the run still reports Ployz against plain Docker.
		ls, _ := l.Exec(db.ctx, "m1", "docker", "service", "ls")
		ps, _ := l.Exec(db.ctx, "m1", "sh", "-c", "docker service ps --no-trunc bench_s0 | head -20")
		b.Errorf("docker stack deploy: fewer than %d Containers running after 5 minutes\n%s\n%s", db.total(), ls, ps)
	}
	took := time.Since(start)
	l.Exec(db.ctx, "m1", "docker", "stack", "rm", "bench")
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		n := 0
		for _, m := range l.Machines {
			n += db.running(m.Name, "label=com.docker.stack.namespace=bench")
		}
		if n == 0 {
			break
		}
	}
	return took
}
