// Package e2e holds the lab scenarios: tests that run real Machines as
// containers (see e2e/lab). They run only under `make test` (PLOYZ_LAB=1),
// which builds the binaries first; plain `go test ./...` skips them.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/prereq"
)

func TestMain(m *testing.M) {
	if os.Getenv("PLOYZ_LAB") != "1" {
		fmt.Println("e2e: lab scenarios skipped (run them with `make test`, which sets PLOYZ_LAB=1)")
		os.Exit(m.Run())
	}
	if os.Getenv("PLOYZ_LAB_FAIL_ON_PURPOSE") == "1" {
		// A child run of TestLabCleansUpAfterFailure: the parent built the
		// images and owns the sweep.
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	code := func() int {
		defer cancel()
		if err := lab.SweepTestLabs(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: sweeping old test labs:", err)
			return 1
		}
		bin := os.Getenv(lab.EnvBinDir)
		start := time.Now()
		// Every OS of the support matrix: the scenarios run on the default,
		// the smoke scenario on the oldest supported.
		var imgs []string
		for _, dist := range lab.OSes {
			img, err := lab.BuildMachineImageFor(ctx, dist, bin, func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
			if err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
				return 1
			}
			imgs = append(imgs, img)
		}
		if err := lab.BuildTestApp(ctx, bin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		fmt.Printf("e2e: Machine images %s ready in %s\n", strings.Join(imgs, ", "), time.Since(start).Round(100*time.Millisecond))
		code := m.Run()
		if err := lab.SweepTestLabs(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: sweeping test labs:", err)
		}
		return code
	}()
	os.Exit(code)
}

func labEnabled() bool { return os.Getenv("PLOYZ_LAB") == "1" }

// needLab skips a lab scenario outside `make test` (a benchmark outside
// `make bench`).
func needLab(tb testing.TB) {
	tb.Helper()
	if !labEnabled() {
		prereq.Skip(tb, "lab scenario or benchmark: runs with PLOYZ_LAB=1 (make test's lab step, after the unit tests; make bench)")
	}
}

// needLightLab is needLab for a scenario that may run beside another
// one: it neither counts failed requests under load nor times a failover,
// and its bounds hold on a loaded host. Such scenarios run after the
// sequential ones, as many at once as go test's -parallel allows
// (GOMAXPROCS: two on the 2-core CI machine), so make test's lab step
// fits its budget. Each lab has its own network and name prefix.
func needLightLab(t *testing.T) {
	t.Helper()
	needLab(t)
	t.Parallel()
}
