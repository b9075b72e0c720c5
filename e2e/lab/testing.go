package lab

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// EnvBinDir names the directory of freshly built binaries lab tests use;
// the e2e TestMain sets it after `make build`.
const EnvBinDir = "PLOYZ_BIN_DIR"

// testPrefix starts the name of every lab a test creates, so a later run
// can sweep what a killed run left behind.
const testPrefix = "t-"

var testSeq atomic.Int32

// ForTest starts a lab of n DefaultOS Machines for t, with the testapp
// image loaded into each, and removes it when t ends — passed, failed or
// panicked.
func ForTest(t testing.TB, n int) *Lab {
	t.Helper()
	return ForTestOS(t, n, DefaultOS)
}

// ForTestOS is ForTest with Machines running dist.
func ForTestOS(t testing.TB, n int, dist OS) *Lab {
	t.Helper()
	return forTest(t, Options{Machines: n, OS: dist})
}

// ForTestVM is ForTest with Machines that are QEMU virtual machines (see
// Options.VM): their own kernel, kernel WireGuard and a ZFS pool "ployz".
func ForTestVM(t testing.TB, n int) *Lab {
	t.Helper()
	return forTest(t, Options{Machines: n, VM: true})
}

// ForTestBare is ForTest with Machines that have no Ployz (Options.Bare).
func ForTestBare(t testing.TB, n int) *Lab {
	t.Helper()
	return forTest(t, Options{Machines: n, Bare: true})
}

func forTest(t testing.TB, o Options) *Lab {
	t.Helper()
	binDir := os.Getenv(EnvBinDir)
	if binDir == "" {
		t.Fatalf("lab: %s is not set; run lab tests through `make test`", EnvBinDir)
	}
	name := fmt.Sprintf("%s%d", TestLabPrefix(os.Getpid()), testSeq.Add(1))
	if o.VM {
		// A cold VM image build (the zfs module compiles) takes tens of
		// minutes: give it its own deadline so booting keeps its own.
		bctx, bcancel := context.WithTimeout(context.Background(), 2*time.Hour)
		_, err := BuildVMImage(bctx, binDir, t.Logf)
		bcancel()
		if err != nil {
			t.Fatalf("lab: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), map[bool]time.Duration{false: 10 * time.Minute, true: 30 * time.Minute}[o.VM])
	defer cancel()
	t.Cleanup(func() {
		if err := Remove(context.Background(), name); err != nil {
			t.Errorf("lab %s cleanup: %v", name, err)
		}
	})
	start := time.Now()
	o.Name, o.BinDir, o.StateDir, o.Logf = name, binDir, t.TempDir(), t.Logf
	l, err := Up(ctx, o)
	if err != nil {
		t.Fatalf("lab up: %v", err)
	}
	t.Logf("lab %s: %d %s Machines (vm=%t) booted in %s", name, o.Machines, o.OS, o.VM, time.Since(start).Round(100*time.Millisecond))
	if err := l.LoadTestApp(ctx); err != nil {
		t.Fatalf("lab: %v", err)
	}
	return l
}

// TestLabPrefix starts the name of every lab that the test process pid
// creates.
func TestLabPrefix(pid int) string { return fmt.Sprintf("%s%d-", testPrefix, pid) }

// sweepable reports whether lab n is a test lab whose test process is
// gone (or is this one): another run's live lab is left alone, so two lab
// test runs can share a host.
func sweepable(n string) bool {
	if !strings.HasPrefix(n, testPrefix) {
		return false
	}
	pid, _, _ := strings.Cut(strings.TrimPrefix(n, testPrefix), "-")
	if pid == strconv.Itoa(os.Getpid()) {
		return true
	}
	_, err := os.Stat("/proc/" + pid)
	return err != nil
}

// SweepTestLabs removes every lab a test run created whose run has ended
// (and this run's), for TestMain to call before and after the scenarios.
func SweepTestLabs(ctx context.Context) error {
	names, err := Names(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if sweepable(n) {
			if err := Remove(ctx, n); err != nil {
				return err
			}
		}
	}
	// A network whose containers are gone is found by its own label.
	out, err := docker(ctx, "network", "ls", "--filter", "label="+labelLab, "--format", `{{.Label "`+labelLab+`"}}`)
	if err != nil {
		return err
	}
	for _, n := range strings.Fields(out) {
		if sweepable(n) {
			if err := Remove(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}
