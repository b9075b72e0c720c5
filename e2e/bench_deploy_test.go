package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// BenchmarkDeploy10x3 deploys 10 Services × 3 replicas on 3 Machines and
// compares its wall time, in the same run, with creating and starting the
// same 30 Containers with plain `docker run` on the same Machines, and with
// `docker stack deploy` of an equivalent stack on a Swarm formed from them
// (issue 6). Readiness is "none" everywhere so all three wait for the same
// thing: every Container running.
func BenchmarkDeploy10x3(b *testing.B) {
	if !labEnabled() {
		b.Skip("lab benchmark: run with `make bench`")
	}
	l := lab.ForTest(b, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	op := newOperator(b, l)
	var in struct{}
	op.json(b, &in, "machine", "init", "root@"+l.Machines[0].IP.String(), "--name", "m1")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[1].IP.String(), "--name", "m2")
	op.json(b, &in, "machine", "add", "root@"+l.Machines[2].IP.String(), "--name", "m3")

	var compose, stack strings.Builder
	compose.WriteString("name: bench\nservices:\n")
	stack.WriteString("version: \"3.8\"\nservices:\n")
	for i := range 10 {
		fmt.Fprintf(&compose, "  s%d:\n    image: %s\n    environment: {MESSAGE: \"%%s\"}\n    deploy: {replicas: 3}\n", i, lab.TestAppImage)
		// Swarm's predefined host network, one replica per node and a port
		// per Service: nested Machines cannot build Swarm's overlay.
		fmt.Fprintf(&stack, "  s%d:\n    image: %s\n    environment: {MESSAGE: \"%%s\", PORT: \"%d\"}\n    deploy: {replicas: 3, placement: {max_replicas_per_node: 1}}\n    networks: [outside]\n", i, lab.TestAppImage, 9100+i)
	}
	stack.WriteString("networks:\n  outside:\n    external: true\n    name: host\n")

	// Swarm from the same Machines, over the lab network.
	m1 := l.Machines[0]
	if _, err := l.Exec(ctx, "m1", "docker", "swarm", "init", "--advertise-addr", m1.IP.String()); err != nil {
		b.Fatal(err)
	}
	tok, err := l.Exec(ctx, "m1", "docker", "swarm", "join-token", "-q", "worker")
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range l.Machines[1:] {
		if _, err := l.Exec(ctx, m.Name, "docker", "swarm", "join", "--token", tok, m1.IP.String()+":2377"); err != nil {
			b.Fatal(err)
		}
	}

	running := func(m, filter string) int {
		out, _ := l.Exec(ctx, m, "docker", "ps", "-q", "--filter", filter)
		return len(strings.Fields(out))
	}
	waitAll := func(filter string, want int) {
		for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			n := 0
			for _, m := range l.Machines {
				n += running(m.Name, filter)
			}
			if n >= want {
				return
			}
		}
		b.Fatalf("%s: fewer than %d Containers running after 5 minutes", filter, want)
	}
	dir := b.TempDir()
	var ployzT, dockerT, swarmT time.Duration
	b.ResetTimer()
	for i := range b.N {
		msg := fmt.Sprintf("run%d", i)
		// Ployz.
		f := filepath.Join(dir, "compose.yaml")
		os.WriteFile(f, []byte(strings.ReplaceAll(compose.String(), "%s", msg)), 0o644)
		start := time.Now()
		op.must(b, "deploy", "-f", f, "-y")
		ployzT += time.Since(start)
		op.must(b, "project", "rm", "bench", "-y")

		// Plain docker: the same 30 Containers, 10 per Machine, in parallel per Machine.
		start = time.Now()
		var wg sync.WaitGroup
		for _, m := range l.Machines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := range 10 {
					l.Exec(ctx, m.Name, "docker", "run", "-d", "--network", "ployz", "--label", "bench=plain",
						"--name", fmt.Sprintf("plain-%d-%s-%d", s, m.Name, i), "-e", "MESSAGE="+msg, lab.TestAppImage)
				}
			}()
		}
		wg.Wait()
		waitAll("label=bench=plain", 30)
		dockerT += time.Since(start)
		for _, m := range l.Machines {
			ids, _ := l.Exec(ctx, m.Name, "docker", "ps", "-aq", "--filter", "label=bench=plain")
			if ids != "" {
				l.Exec(ctx, m.Name, append([]string{"docker", "rm", "-f"}, strings.Fields(ids)...)...)
			}
		}

		// Swarm.
		sf := "/root/stack.yml"
		if _, err := l.Exec(ctx, "m1", "sh", "-c", "cat > "+sf+" <<'EOF'\n"+strings.ReplaceAll(stack.String(), "%s", msg)+"EOF"); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if out, err := l.Exec(ctx, "m1", "docker", "stack", "deploy", "-c", sf, "bench"); err != nil {
			b.Fatalf("stack deploy: %v %s", err, out)
		}
		waitAll("label=com.docker.stack.namespace=bench", 30)
		swarmT += time.Since(start)
		l.Exec(ctx, "m1", "docker", "stack", "rm", "bench")
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			n := 0
			for _, m := range l.Machines {
				n += running(m.Name, "label=com.docker.stack.namespace=bench")
			}
			if n == 0 {
				break
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(ployzT.Seconds()/n, "ployz-s")
	b.ReportMetric(dockerT.Seconds()/n, "docker-s")
	b.ReportMetric(swarmT.Seconds()/n, "swarm-s")
	b.ReportMetric(ployzT.Seconds()/dockerT.Seconds(), "ployz/docker")
	b.ReportMetric(ployzT.Seconds()/swarmT.Seconds(), "ployz/swarm")
	b.Logf("deploy 10x3: ployz %.1fs, plain docker %.1fs (%.2fx), docker stack deploy %.1fs (%.2fx)",
		ployzT.Seconds()/n, dockerT.Seconds()/n, ployzT.Seconds()/dockerT.Seconds(), swarmT.Seconds()/n, ployzT.Seconds()/swarmT.Seconds())
}
