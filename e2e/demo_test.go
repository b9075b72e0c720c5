package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ployz/ployz/e2e/lab"
)

// TestDemoRunsTwice runs `make demo`'s script twice in a row on one
// operator home, as a user who types `make demo` again later would: the
// second run meets new lab Machines (new SSH host keys) at the addresses
// the first run pinned, and must still form the Cluster and answer through
// every Machine's ingress without asking anyone to accept a key. Then
// `lab down` forgets exactly the lab's pins.
func TestDemoRunsTwice(t *testing.T) {
	needLab(t)
	name := lab.TestLabPrefix(os.Getpid()) + "demo"
	t.Cleanup(func() {
		if err := lab.Remove(context.Background(), name); err != nil {
			t.Errorf("lab %s cleanup: %v", name, err)
		}
	})
	home := t.TempDir()
	known := filepath.Join(home, ".config", "ployz", "known_hosts")
	// A real server's pin, which nothing the lab does may touch.
	pk, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spk, err := ssh.NewPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	other := knownhosts.Line([]string{"203.0.113.7"}, spk) + "\n"
	if err := os.MkdirAll(filepath.Dir(known), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(known, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	env := demoEnv(home, name)

	for run := 1; run <= 2; run++ {
		start := time.Now()
		out := runDemo(t, env, run)
		if !strings.Contains(out, "hello's web answers through the ingress of every Machine") || !strings.Contains(out, "hello's store answers") {
			t.Fatalf("demo run %d did not end with the example answering:\n%s", run, out)
		}
		t.Logf("demo run %d passed in %s", run, time.Since(start).Round(time.Second))
	}

	l, err := lab.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	ciJob(t, env, l, name)
	pins, _ := os.ReadFile(known)
	for _, a := range l.Addrs() {
		if !strings.Contains(string(pins), a+" ") {
			t.Fatalf("known_hosts has no pin for lab Machine %s after the demo:\n%s", a, pins)
		}
	}
	down := exec.Command(filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), "lab", "--name", name, "down")
	down.Env = env
	if out, err := down.CombinedOutput(); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	pins, _ = os.ReadFile(known)
	if string(pins) != other {
		t.Fatalf("after lab down known_hosts should hold only the other server's pin, got:\n%s", pins)
	}
}

// demoEnv is this process's environment with its own operator home: no
// context, pin or lab state of the user running the tests leaks in.
func demoEnv(home, name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "PLOYZ_OPERATOR_STORE", "PLOYZ_CONTEXT", "PLOYZ_CONNECT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "PLOYZ_DEMO_LAB="+name, "PLOYZ_DEMO_MACHINES=2")
}

func runDemo(t *testing.T, env []string, run int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join("..", "packaging", "demo.sh"))
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo run %d: %v\n%s", run, err, out.String())
	}
	return out.String()
}

// ciJob is a CI job's way in, on the demo's Cluster: the context exported
// from the operator's home, given to a job with an empty home through
// PLOYZ_CONTEXT and the lab key through PLOYZ_SSH_KEY (the key itself, as a
// secret variable holds it). The job reads the Cluster, and a change
// without -y fails instead of prompting, since the job has no terminal.
func ciJob(t *testing.T, env []string, l *lab.Lab, name string) {
	t.Helper()
	ployz := filepath.Join(os.Getenv(lab.EnvBinDir), "ployz")
	export := exec.Command(ployz, "ctx", "export", name)
	export.Env = env
	doc, err := export.Output()
	if err != nil {
		t.Fatalf("ctx export: %v", err)
	}
	key, err := os.ReadFile(lab.KeyPath(l.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	job := append(demoEnv(t.TempDir(), name), "PLOYZ_CONTEXT="+string(doc), "PLOYZ_SSH_KEY="+string(key))
	ps := exec.Command(ployz, "ps", "-p", "hello", "--json")
	ps.Env = job
	if out, err := ps.CombinedOutput(); err != nil || !strings.Contains(string(out), "hello-production-web") {
		t.Fatalf("CI job: ployz ps: %v\n%s", err, out)
	}
	// A change the job has not confirmed: another message on web.
	compose, err := os.ReadFile(filepath.Join("..", "examples", "hello", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(changed, bytes.Replace(compose, []byte("hello from web"), []byte("hello from CI"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	deploy := exec.Command(ployz, "deploy", "-f", changed)
	deploy.Env = job
	out, err := deploy.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pass -y") {
		t.Fatalf("CI job: deploy without -y and without a terminal = %v; want refused naming -y\n%s", err, out)
	}
}
