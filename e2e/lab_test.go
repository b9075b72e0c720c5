package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// TestLabMachines checks what every later scenario relies on: Machines
// boot systemd cleanly, run their own Docker with the testapp image, accept
// the lab's SSH key, reach one another, and can be partitioned, healed,
// stopped and started.
func TestLabMachines(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	t.Run("boot", func(t *testing.T) {
		for _, m := range l.Machines {
			state, _ := l.Exec(ctx, m.Name, "systemctl", "is-system-running")
			if state != "running" && state != "degraded" {
				t.Errorf("%s: systemd is %q, want running or degraded", m.Name, state)
			}
			failed, err := l.FailedUnits(ctx, m.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range failed {
				if strings.HasPrefix(u, "ployz") || u == "docker.service" || u == "ssh.service" {
					t.Errorf("%s: unit %s failed", m.Name, u)
				}
			}
			if len(failed) > 0 {
				t.Logf("%s: failed units (not ours): %v", m.Name, failed)
			}
			if v, err := l.Exec(ctx, m.Name, "docker", "info", "--format", "{{.ServerVersion}}"); err != nil {
				t.Errorf("%s: docker info: %v", m.Name, err)
			} else if major, _, _ := strings.Cut(v, "."); atoi(major) < 26 {
				t.Errorf("%s: dockerd %s on the default OS, want Debian 13's 26 or newer", m.Name, v)
			} else {
				t.Logf("%s: dockerd %s", m.Name, v)
			}
			if v, err := l.Exec(ctx, m.Name, "ployzd", "--version"); err != nil || !strings.Contains(v, "ployzd") {
				t.Errorf("%s: ployzd --version = %q, %v", m.Name, v, err)
			}
		}
	})

	t.Run("testapp", func(t *testing.T) {
		m := l.Machines[0].Name
		if _, err := l.Exec(ctx, m, "docker", "run", "-d", "--name", "app", "-e", "MESSAGE=hello-lab", "-p", "8080:8080", lab.TestAppImage); err != nil {
			t.Fatal(err)
		}
		var body string
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			body, _ = l.Exec(ctx, m, "curl", "-fsS", "http://127.0.0.1:8080/")
			if strings.Contains(body, "hello-lab") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.Contains(body, "hello-lab") {
			t.Fatalf("testapp answered %q, want its MESSAGE", body)
		}
		// The other Machines reach it over the lab network.
		for _, o := range l.Machines[1:] {
			out, err := l.Exec(ctx, o.Name, "curl", "-fsS", "http://"+l.Machines[0].IP.String()+":8080/healthz")
			if err != nil || out != "ok" {
				t.Errorf("%s -> %s testapp: %q, %v", o.Name, m, out, err)
			}
		}
	})

	t.Run("ssh", func(t *testing.T) {
		for _, m := range l.Machines {
			out, err := l.SSH(ctx, m.Name, "hostname")
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(out) != m.Name {
				t.Errorf("ssh %s: hostname %q", m.Name, out)
			}
		}
	})

	t.Run("mesh-of-lab", func(t *testing.T) {
		assertReach(ctx, t, l, nil)
	})

	t.Run("partition", func(t *testing.T) {
		if err := l.Partition(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		if err := l.Partition(ctx, "m2"); err != nil { // idempotent
			t.Fatal(err)
		}
		assertReach(ctx, t, l, map[[2]string]bool{{"m1", "m2"}: false, {"m2", "m1"}: false, {"m3", "m2"}: false, {"m2", "m3"}: false})
		if err := l.Heal(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		assertReach(ctx, t, l, nil)
	})

	t.Run("stop-start", func(t *testing.T) {
		if err := l.Stop(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		if ok, err := l.Reachable(ctx, "m1", "m2"); err != nil || ok {
			t.Errorf("m1 reaches m2 after stop: %v, %v", ok, err)
		}
		start := time.Now()
		if err := l.Start(ctx, "m2"); err != nil {
			t.Fatal(err)
		}
		t.Logf("m2 rebooted in %s", time.Since(start).Round(100*time.Millisecond))
		assertReach(ctx, t, l, nil)
	})

	t.Run("bad-input", func(t *testing.T) {
		_, err := l.Machine("m9")
		if err == nil || !strings.Contains(err.Error(), "m1, m2, m3") {
			t.Errorf("unknown Machine error should list valid names, got %v", err)
		}
		if err := l.Partition(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("partition of unknown Machine: %v", err)
		}
	})
}

// assertReach checks every ordered pair of Machines; pairs in want map to
// the expected answer, all others must reach each other.
func assertReach(ctx context.Context, t *testing.T, l *lab.Lab, want map[[2]string]bool) {
	t.Helper()
	for _, a := range l.Machines {
		for _, b := range l.Machines {
			if a == b {
				continue
			}
			expect, ok := want[[2]string{a.Name, b.Name}]
			if !ok {
				expect = true
			}
			got, err := l.Reachable(ctx, a.Name, b.Name)
			if err != nil {
				t.Fatal(err)
			}
			if got != expect {
				t.Errorf("%s reaches %s: %v, want %v", a.Name, b.Name, got, expect)
			}
		}
	}
}

// TestLabCleansUpAfterFailure runs a scenario that fails on purpose in a
// child process and checks that its lab left no container or network.
func TestLabCleansUpAfterFailure(t *testing.T) {
	needLightLab(t)
	if os.Getenv("PLOYZ_LAB_FAIL_ON_PURPOSE") == "1" {
		lab.ForTest(t, 1)
		t.Fatal("failing on purpose")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLabCleansUpAfterFailure$", "-test.v")
	cmd.Env = append(os.Environ(), "PLOYZ_LAB_FAIL_ON_PURPOSE=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "failing on purpose") {
		t.Fatalf("child scenario should have failed on purpose; err=%v\n%s", err, out)
	}
	prefix := lab.TestLabPrefix(cmd.Process.Pid)
	names, err := lab.Names(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			t.Errorf("lab %s was left behind by the failing scenario", n)
		}
	}
	nets, err := exec.Command("docker", "network", "ls", "--filter", "label=ployz.lab", "--format", "{{.Name}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range strings.Fields(string(nets)) {
		if strings.HasPrefix(n, prefix) {
			t.Errorf("network %s was left behind by the failing scenario", n)
		}
	}
	t.Logf("the failing child (pid %d) left nothing behind", cmd.Process.Pid)
}

// atoi is strconv.Atoi with 0 for anything that is not a number.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
