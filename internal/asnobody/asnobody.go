package asnobody

import (
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

// Env carries the helper's mode into the re-executed test binary; a helper
// test function does its work only when Env is set.
const Env = "PLOYZ_ASNOBODY_HELPER"

// UID is nobody's uid and gid, ending tb when the host has no such user.
func UID(tb testing.TB) (uid, gid uint32) {
	tb.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		prereq.Missing(tb, "the user nobody", err)
	}
	id, err1 := strconv.ParseUint(u.Uid, 10, 32)
	g, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		tb.Fatalf("nobody has uid %q gid %q", u.Uid, u.Gid)
	}
	return uint32(id), uint32(g)
}

// Command returns the test binary, copied to a directory nobody can enter,
// set to run only the test named helper as nobody with Env=mode and args
// after "--" (read them with Args). It needs root.
func Command(tb testing.TB, helper, mode string, args ...string) *exec.Cmd {
	tb.Helper()
	prereq.Root(tb, "to run a process as nobody")
	uid, gid := UID(tb)
	bin := executableCopy(tb)
	cmd := exec.Command(bin, append([]string{"-test.run=^" + helper + "$", "-test.count=1", "--"}, args...)...)
	cmd.Env = append(os.Environ(), Env+"="+mode)
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	return cmd
}

// Mode is the helper's mode, "" in an ordinary test run.
func Mode() string { return os.Getenv(Env) }

// Args are the arguments Command passed after "--".
func Args() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// executableCopy copies the running test binary into a fresh 0755
// directory: go test's own build directory is root's alone.
func executableCopy(tb testing.TB) string {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ployz-asnobody-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, filepath.Base(self))
	dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
	return bin
}

// Helper is the body of the helper test function Command names: it runs
// the mode's function when started by Command and skips in an ordinary
// run.
func Helper(t *testing.T, modes map[string]func(*testing.T)) {
	t.Helper()
	mode := Mode()
	if mode == "" {
		prereq.Skip(t, "entry point of a helper process that asnobody.Command runs as nobody")
	}
	f, ok := modes[mode]
	if !ok {
		t.Fatalf("unknown helper mode %q", mode)
	}
	f(t)
}
