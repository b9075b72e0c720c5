package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// `lab down` forgets exactly the lab's pins. It checks outcomes, not
// timings, so it runs beside the VM scenarios (needLightLab): that moves
// its ~3 minutes off make test's critical path.
func TestDemoRunsTwice(t *testing.T) {
	needLightLab(t)
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
	keyFile := lab.KeyPath(filepath.Join(home, ".local", "state", "ployz", "lab", name))
	for _, sc := range []struct {
		what string
		run  func()
	}{
		{"rollback scenario", func() { rollbackScenario(t, env, l, name) }},
		{"CI job", func() { ciJob(t, env, keyFile, name) }},
		{"team scenario", func() { teamScenario(t, l, env, keyFile, name) }},
	} {
		start := time.Now()
		sc.run()
		t.Logf("%s passed in %s", sc.what, time.Since(start).Round(time.Second))
	}
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
func ciJob(t *testing.T, env []string, keyFile, name string) {
	t.Helper()
	ployz := filepath.Join(os.Getenv(lab.EnvBinDir), "ployz")
	export := exec.Command(ployz, "ctx", "export", name)
	export.Env = env
	doc, err := export.Output()
	if err != nil {
		t.Fatalf("ctx export: %v", err)
	}
	key, err := os.ReadFile(keyFile)
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
	deploy := exec.Command(ployz, "deploy", "-f", helloWith(t, "hello from web", "hello from CI"))
	deploy.Env = job
	out, err := deploy.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pass -y") {
		t.Fatalf("CI job: deploy without -y and without a terminal = %v; want refused naming -y\n%s", err, out)
	}
}

// helloWith is examples/hello with old replaced by new, in a temp file.
func helloWith(t *testing.T, old, new string) string {
	t.Helper()
	compose, err := os.ReadFile(filepath.Join("..", "examples", "hello", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(p, bytes.Replace(compose, []byte(old), []byte(new), -1), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rollbackScenario, on the demo's Cluster, from the demo's operator home:
//   - a new revision runs web from another tag of the test image with
//     another message; `ployz rollback` deploys the demo's revision again
//     as a new revision, and every ingress serves its message;
//   - once that tag is removed from every Machine, a rollback to it is
//     refused before anything changes, naming the image.
//
// teamScenario refuses an unknown revision.
func rollbackScenario(t *testing.T, env []string, l *lab.Lab, name string) {
	t.Helper()
	ctx := context.Background()
	command := func(args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(os.Getenv(lab.EnvBinDir), "ployz"), append([]string{"--context", name}, args...)...)
		cmd.Env = env
		return cmd
	}
	ployz := func(args ...string) (string, error) {
		out, err := command(args...).CombinedOutput()
		return string(out), err
	}
	const tag = "ployz-testapp:rollback-test"
	for _, m := range l.Machines {
		if out, err := l.Exec(ctx, m.Name, "docker", "tag", lab.TestAppImage, tag); err != nil {
			t.Fatalf("%s: docker tag: %v %s", m.Name, err, out)
		}
	}
	rev2 := helloWith(t, "hello from web", "hello from revision 2")
	if b, err := os.ReadFile(rev2); err == nil {
		b = bytes.Replace(b, []byte("image: ployz-testapp:latest\n    environment:\n      PORT: \"8080\""), []byte("image: "+tag+"\n    environment:\n      PORT: \"8080\""), 1)
		if err := os.WriteFile(rev2, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdout, err := command("deploy", "-f", rev2, "-y", "--json").Output()
	var doc struct {
		Plan struct {
			Revision int `json:"revision"`
		} `json:"plan"`
	}
	if err != nil || json.Unmarshal(stdout, &doc) != nil || doc.Plan.Revision < 2 {
		t.Fatalf("deploy the tagged revision: %v\n%s", err, stdout)
	}
	tagged := doc.Plan.Revision
	webSays(t, l, "hello from revision 2")

	// The default target: the newest completed revision before the latest,
	// the one the demo run deployed.
	want := fmt.Sprintf("rollback to revision %d", tagged-1)
	out, err := ployz("rollback", "-p", "hello", "-y")
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("rollback: %v; want %q\n%s", err, want, out)
	}
	webSays(t, l, "hello from web")
	if out, _ := ployz("deploy", "ls", "--json"); !strings.Contains(out, `"why": "`+want+`"`) {
		t.Fatalf("deploy ls does not show %q:\n%s", want, out)
	}

	for _, m := range l.Machines {
		if out, err := l.Exec(ctx, m.Name, "docker", "rmi", tag); err != nil {
			t.Fatalf("%s: docker rmi: %v %s", m.Name, err, out)
		}
	}
	to := fmt.Sprint(tagged)
	out, err = ployz("rollback", "-p", "hello", "--to", to, "-y")
	if err == nil || !strings.Contains(out, "image "+tag+" is on no Machine") || !strings.Contains(out, "nothing changed") {
		t.Fatalf("rollback to a revision whose image is gone = %v; want refused naming %s\n%s", err, tag, out)
	}
	if out, _ := ployz("rollback", "-p", "hello", "--to", to, "--dry-run"); !strings.Contains(out, "refusing the rollback") {
		t.Fatalf("a dry run must refuse the same way:\n%s", out)
	}
	webSays(t, l, "hello from web")
}

// webSays waits until hello's web answers with msg through every
// Machine's ingress.
func webSays(t *testing.T, l *lab.Lab, msg string) {
	t.Helper()
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" ingress serves "+msg, func() error {
			req, _ := http.NewRequest("GET", "http://"+m.IP.String()+"/", nil)
			req.Host = "hello.example.test"
			resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if !strings.Contains(string(b), msg) {
				return fmt.Errorf("%s answered %d %s", m.IP, resp.StatusCode, b)
			}
			return nil
		})
	}
}
