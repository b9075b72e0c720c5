package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

var (
	testAppOnce sync.Once
	testAppRef  string
	testAppErr  error
)

// TestApp is an image of e2e/testapp (the lab's test Service: HTTP on
// 8080, readiness, notify and one-shot modes), built statically and
// imported FROM scratch under a tag naming its content, once per test
// binary; the lab's ployz-testapp tag is left alone.
func TestApp(tb testing.TB, cli *client.Client) string {
	tb.Helper()
	testAppOnce.Do(func() { testAppRef, testAppErr = importTestApp(cli) })
	if testAppErr != nil {
		tb.Fatalf("testapp image: %v", testAppErr)
	}
	return testAppRef
}

// BuildTestApp builds e2e/testapp statically into dir and returns its
// path: for a test that mounts the binary rather than running the image.
func BuildTestApp(dir string) (string, error) {
	bin := filepath.Join(dir, "testapp")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/ployz/ployz/e2e/testapp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(err.Error() + ": " + string(out))
	}
	return bin, nil
}

func importTestApp(cli *client.Client) (string, error) {
	dir, err := os.MkdirTemp("", "ployz-testapp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin, err := BuildTestApp(dir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	ref := "ployz-daemontest-testapp:" + hex.EncodeToString(sum[:])[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	tw.WriteHeader(&tar.Header{Name: "testapp", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}) // in memory
	tw.Write(b)                                                                                           // in memory
	tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &layer, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/testapp"]`, "EXPOSE 8080"}})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	io.Copy(io.Discard, rc) // progress
	return ref, nil
}
