package dockertest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

// Daemon ends tb through prereq unless the docker CLI is installed and
// its daemon answers.
func Daemon(tb testing.TB) {
	tb.Helper()
	prereq.Command(tb, "docker")
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		prereq.Missing(tb, "a Docker daemon", fmt.Errorf("docker version: %w: %s", err, strings.TrimSpace(string(out))))
	}
}

// Root is Docker's data directory, which the test reads Containers' log
// files from: it ends tb through prereq unless Docker answers and this
// process may read the directory (root).
func Root(tb testing.TB) string {
	tb.Helper()
	Daemon(tb)
	out, err := exec.Command("docker", "info", "--format", "{{.DockerRootDir}}").CombinedOutput()
	if err != nil {
		tb.Fatalf("docker info: %v: %s", err, out)
	}
	root := strings.TrimSpace(string(out))
	if _, err := os.ReadDir(filepath.Join(root, "containers")); err != nil {
		prereq.Missing(tb, "read access to Docker's Container files (root)", err)
	}
	return root
}

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// Image is a local image whose entry point is emit (./emit: scripted
// output, no shell), imported FROM scratch under a tag naming its
// content, once per test binary; Docker keeps it for the next run.
func Image(tb testing.TB) string {
	tb.Helper()
	Daemon(tb)
	imageOnce.Do(func() { imageRef, imageErr = importEmit() })
	if imageErr != nil {
		tb.Fatalf("dockertest image: %v", imageErr)
	}
	return imageRef
}

// importEmit builds emit statically and imports it as the only file of
// an image, unless an image of that content is present already.
func importEmit() (string, error) {
	dir, err := os.MkdirTemp("", "ployz-dockertest")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "emit")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/ployz/ployz/internal/dockertest/emit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build emit: %w: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	ref := "ployz-dockertest-emit:" + hex.EncodeToString(sum[:])[:16]
	if exec.Command("docker", "image", "inspect", ref).Run() == nil {
		return ref, nil
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: "emit", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return "", err
	}
	if _, err := tw.Write(b); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	imp := exec.Command("docker", "import", "--change", `ENTRYPOINT ["/emit"]`, "-", ref)
	imp.Stdin = &layer
	if out, err := imp.CombinedOutput(); err != nil {
		return "", errors.New("docker import: " + err.Error() + ": " + string(out))
	}
	return ref, nil
}

// ShellImage is an image with a shell that the local Docker already
// holds, for a build stage that runs commands with nothing to pull: the
// lab's Debian base (ployz-lab-base-*, built by the lab). It ends tb
// through prereq when there is none.
func ShellImage(tb testing.TB) string {
	tb.Helper()
	Daemon(tb)
	out, err := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
	if err != nil {
		tb.Fatalf("docker images: %v", err)
	}
	for _, img := range strings.Fields(string(out)) {
		if strings.HasPrefix(img, "ployz-lab-base-") {
			return img
		}
	}
	prereq.Missing(tb, "a local image with a shell (ployz-lab-base-*, built by the lab)", nil)
	return ""
}

// RemoveRepo removes every tag of repo from the local Docker, best
// effort: what a test's builds left.
func RemoveRepo(repo string) {
	out, _ := exec.Command("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repo).Output()
	var tags []string
	for _, img := range strings.Fields(string(out)) {
		if !strings.HasSuffix(img, ":<none>") {
			tags = append(tags, img)
		}
	}
	if len(tags) > 0 {
		exec.Command("docker", append([]string{"rmi", "-f"}, tags...)...).Run() // best effort
	}
}
