package e2e

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/prereq"
)

// benchImage is a ~200 MB FROM-scratch image of incompressible bytes.
const benchImage = "ployz-bench-delivery:200mb"

func importBenchImage(ctx context.Context, t testing.TB, size int64) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{Name: "blob", Mode: 0o644, Size: size, Typeflag: tar.TypeReg})
		if err == nil {
			_, err = io.CopyN(tw, rand.Reader, size)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	cmd := exec.CommandContext(ctx, "docker", "import", "-", benchImage)
	cmd.Stdin = pr
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", benchImage).Run() }) // best effort
}

// benchCluster is a formed lab Cluster of 3 Machines for a benchmark.
func benchCluster(b *testing.B) (context.Context, *lab.Lab, *operator) {
	needLab(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	b.Cleanup(cancel)
	l := lab.ForTest(b, 3)
	op := newOperator(b, l)
	formCluster(b, l, op)
	return ctx, l, op
}

// saveLoadAll is the by-hand delivery: `docker save image | docker exec
// -i MACHINE docker load` into every Machine at once.
func saveLoadAll(ctx context.Context, l *lab.Lab, image string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(l.Machines))
	for i, m := range l.Machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.CommandContext(ctx, "sh", "-c", "docker save "+image+" | docker exec -i "+m.Container+" docker load -q")
			if out, err := c.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("docker save | load into %s: %v: %s", m.Name, err, out)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// BenchmarkImageDelivery measures `ployz image push` of a 200 MB image to 3
// Machines against `docker save | docker load` into the same Machines in
// parallel, in the same run, and prints the ratio (lower is better).
// It is a benchmark (run by `make bench`), never a gate on `make test`.
func BenchmarkImageDelivery(b *testing.B) {
	ctx, l, op := benchCluster(b)
	var t testing.TB = b
	importBenchImage(ctx, t, 200<<20)
	forget := func() {
		for _, m := range l.Machines {
			l.Exec(ctx, m.Name, "docker", "rmi", "-f", benchImage) // absent is fine
		}
	}

	start := time.Now()
	op.must(t, "image", "push", benchImage)
	ployz := time.Since(start)
	forget()

	start = time.Now()
	err := saveLoadAll(ctx, l, benchImage)
	manual := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	report(t, fmt.Sprintf("image delivery, 200 MB to %d Machines: ployz image push %.1fs, parallel docker save|load %.1fs, ratio %.2fx",
		len(l.Machines), ployz.Seconds(), manual.Seconds(), ployz.Seconds()/manual.Seconds()))

	// A new image that adds one small layer over the delivered one: only
	// that layer should move.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+benchImage+"\nCOPY small.txt /\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("one small change\n"), 0o644)
	built, err := images.Build(ctx, images.BuildRequest{Repo: "ployz-bench-delivery-v2", Context: dir})
	tag := built.Tag
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", tag, "ployz-bench-delivery-v2:latest").Run() }) // best effort
	var res []images.Result
	start = time.Now()
	op.json(t, &res, "image", "push", tag)
	second := time.Since(start)
	var moved int64
	for _, r := range res {
		if r.Outcome != "pushed" || r.SkippedLayers != 1 {
			t.Errorf("second push to %s: %+v, want pushed with the 200 MB layer held", r.MachineName, r)
		}
		moved += r.Bytes
	}
	report(t, fmt.Sprintf("second push, one small layer changed: %.1fs, %d bytes moved to %d Machines (%d per Machine)",
		second.Seconds(), moved, len(res), moved/int64(max(len(res), 1))))
	if moved/int64(max(len(res), 1)) > 1<<20 {
		t.Errorf("second push moved %d bytes per Machine, want about the small layer", moved/int64(len(res)))
	}
}

// buildContext writes a FROM-scratch Go web app (the lab's test app) plus
// size bytes of fresh random data and a small version.txt (the one source
// file a rebuild changes), so every call builds a new image that no
// Machine and no build cache holds.
func buildContext(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(os.Getenv(lab.EnvBinDir), "testapp"))
	if err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, size)
	rand.Read(blob) // never fails
	for name, body := range map[string][]byte{
		"testapp":     bin,
		"blob":        blob,
		"version.txt": []byte("v1\n"),
		"Dockerfile":  []byte("FROM scratch\nCOPY testapp /testapp\nCOPY blob /blob\nCOPY version.txt /version.txt\nENTRYPOINT [\"/testapp\"]\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bumpVersion changes the context's one small source file.
func bumpVersion(t testing.TB, dir, v string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "version.txt"), []byte(v+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// buildKitCLI is the nearest this computer has to `docker buildx build`:
// buildx when installed, else a docker CLI whose own BuildKit client
// builds with DOCKER_BUILDKIT=1 (Docker 20.10's CLI has one built in; a
// newer CLI without buildx refuses). It returns the command and its name.
func buildKitCLI(ctx context.Context, t testing.TB) ([]string, string) {
	t.Helper()
	if exec.CommandContext(ctx, "docker", "buildx", "version").Run() == nil {
		return []string{"docker", "buildx", "build", "--load"}, "docker buildx build --load"
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY Dockerfile /\n"), 0o644)
	for _, cli := range []string{"docker", "/usr/bin/docker"} {
		c := exec.CommandContext(ctx, cli, "build", "-q", "-t", "ployz-bench-probe:1", dir)
		c.Env = append(os.Environ(), "DOCKER_BUILDKIT=1")
		if c.Run() == nil {
			exec.Command("docker", "rmi", "ployz-bench-probe:1").Run() // best effort
			return []string{cli, "build"}, "DOCKER_BUILDKIT=1 " + cli + " build"
		}
	}
	prereq.Missing(t, "buildx or a docker CLI that builds with DOCKER_BUILDKIT=1", nil)
	return nil, ""
}

// buildWith runs one timed build of dir with cli (a buildKitCLI command).
func buildWith(ctx context.Context, t testing.TB, cli []string, tag, dir string) time.Duration {
	t.Helper()
	c := exec.CommandContext(ctx, cli[0], append(cli[1:], "-q", "-t", tag, dir)...)
	c.Env = append(os.Environ(), "DOCKER_BUILDKIT=1")
	start := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cli, err, out)
	}
	return time.Since(start)
}

// BenchmarkBuildDeploy times the first deploy of a Service whose image is
// built locally (`ployz deploy` of a compose file with build:, 3 replicas
// on 3 Machines, until every Container is ready; ployz builds with the
// local Docker's BuildKit) against building the same kind of image with
// BuildKit's `docker build` and `docker save | docker load` into the same
// 3 Machines in parallel by hand, in the same run. Then a rebuild after
// one changed source file: `ployz build` against the same BuildKit CLI
// build of the same change, each context built once before.
func BenchmarkBuildDeploy(b *testing.B) {
	ctx, l, op := benchCluster(b)
	var t testing.TB = b
	const size = 64 << 20
	cli, cliName := buildKitCLI(ctx, t)

	web := buildContext(t, size)
	compose := filepath.Join(t.TempDir(), "compose.yaml")
	os.WriteFile(compose, []byte("name: benchbuild\nservices:\n  web:\n    build: {context: "+web+"}\n    environment: {MESSAGE: built}\n    deploy: {replicas: 3, placement: {max_replicas_per_node: 1}}\n"), 0o644)
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "images", "-q", "benchbuild-production-web").Output()
		exec.Command("docker", append([]string{"rmi", "-f"}, strings.Fields(string(out))...)...).Run() // best effort
	})
	start := time.Now()
	out, errs, code := op.run(t, "deploy", "-f", compose, "-y", "--json")
	ployz := time.Since(start)
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "built web as benchbuild-production-web:") {
		t.Fatalf("the deploy did not build web:\n%s", errs)
	}

	manualCtx := buildContext(t, size)
	t.Cleanup(func() { exec.Command("docker", "rmi", "ployz-bench-manual:1", "ployz-bench-manual:2").Run() }) // best effort
	built := buildWith(ctx, t, cli, "ployz-bench-manual:1", manualCtx)
	start = time.Now()
	err := saveLoadAll(ctx, l, "ployz-bench-manual:1")
	manual := built + time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	report(t, fmt.Sprintf("first deploy of a locally built %d MB image, 3 replicas on %d Machines, until ready: ployz deploy (BuildKit) %.1fs, %s + parallel docker save|load %.1fs, ratio %.2fx",
		size>>20, len(l.Machines), ployz.Seconds(), cliName, manual.Seconds(), ployz.Seconds()/manual.Seconds()))

	// One changed source file, rebuilt: both contexts were built once.
	bumpVersion(t, web, "v2")
	start = time.Now()
	out, errs, code = op.run(t, "build", "-f", compose)
	rebuild := time.Since(start)
	if code != 0 || !strings.Contains(errs, "built web as") {
		t.Fatalf("ployz build: exit %d\n%s\n%s", code, out, errs)
	}
	bumpVersion(t, manualCtx, "v2")
	manualRebuild := buildWith(ctx, t, cli, "ployz-bench-manual:2", manualCtx)
	report(t, fmt.Sprintf("rebuild after one changed source file (%d MB context): ployz build %.2fs, %s %.2fs, ratio %.2fx",
		size>>20, rebuild.Seconds(), cliName, manualRebuild.Seconds(), rebuild.Seconds()/manualRebuild.Seconds()))
}

// report prints a benchmark's figure to the test log and stderr.
func report(t testing.TB, line string) {
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
}
