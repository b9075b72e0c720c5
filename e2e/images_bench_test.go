package e2e

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// benchImage is a ~200 MB FROM-scratch image of incompressible bytes.
const benchImage = "ployz-bench-delivery:200mb"

func importBenchImage(ctx context.Context, t *testing.T, size int64) {
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
	t.Cleanup(func() { exec.Command("docker", "rmi", benchImage).Run() }) //nolint:errcheck // best effort
}

// TestImageDeliveryBench measures `ployz image push` of a 200 MB image to 3
// Machines against `docker save | docker load` into the same Machines in
// parallel, in the same run, and prints the ratio (lower is better).
func TestImageDeliveryBench(t *testing.T) {
	needLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	formCluster(t, l, op)
	importBenchImage(ctx, t, 200<<20)
	forget := func() {
		for _, m := range l.Machines {
			l.Exec(ctx, m.Name, "docker", "rmi", "-f", benchImage) //nolint:errcheck // absent is fine
		}
	}

	start := time.Now()
	op.must(t, "image", "push", benchImage)
	ployz := time.Since(start)
	forget()

	start = time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(l.Machines))
	for i, m := range l.Machines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			save := exec.CommandContext(ctx, "docker", "save", benchImage)
			load := exec.CommandContext(ctx, "docker", "exec", "-i", m.Container, "docker", "load", "-q")
			pipe, err := save.StdoutPipe()
			if err != nil {
				errs[i] = err
				return
			}
			load.Stdin = pipe
			if err = save.Start(); err == nil {
				err = load.Run()
				if werr := save.Wait(); err == nil {
					err = werr
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	manual := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("docker save | load into %s: %v", l.Machines[i].Name, err)
		}
	}
	line := fmt.Sprintf("image delivery, 200 MB to %d Machines: ployz image push %.1fs, parallel docker save|load %.1fs, ratio %.2fx",
		len(l.Machines), ployz.Seconds(), manual.Seconds(), ployz.Seconds()/manual.Seconds())
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
}
