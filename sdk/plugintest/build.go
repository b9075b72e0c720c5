// Package plugintest runs real Ployz plugin binaries against an in-process
// host in Go tests: build the binary, start it (managed or long-lived),
// attach, and call it through the same go-plugin path ployzd uses.
package plugintest

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Build compiles the main package pkg (an import path, or a path relative to
// the test's directory) into t.TempDir() and returns the binary's path.
// ldflags are passed to the linker, e.g. "-X main.name=alpha".
func Build(t testing.TB, pkg string, ldflags ...string) string {
	t.Helper()
	bin, err := BuildTo(t.TempDir(), pkg, ldflags...)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildTo is Build for callers without a testing.TB, such as TestMain.
func BuildTo(dir, pkg string, ldflags ...string) (string, error) {
	out := filepath.Join(dir, path.Base(pkg))
	for i := 1; fileExists(out); i++ {
		out = filepath.Join(dir, fmt.Sprintf("%s-%d", path.Base(pkg), i))
	}
	args := []string{"build", "-o", out}
	if os.Getenv("PLOYZ_COVER_PLUGINS") == "1" {
		// `make cover`: each plugin process writes its coverage to GOCOVERDIR.
		args = append(args, "-cover")
	}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.Command(goTool(), append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// goTool finds the go command that is running the tests.
func goTool() string {
	//lint:ignore SA1019 a test binary runs where it was built, so its GOROOT is the go running the test
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
