package zfsvol

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDoubleRecordsThenReplays records three commands of a stand-in for
// the real zfs (a shell script), then replays them: the same stdout,
// stderr and exit code, a large output from its gzipped copy, stdin
// checked against the recorded stream; a command out of order is refused.
func TestDoubleRecordsThenReplays(t *testing.T) {
	fake, rec := t.TempDir(), t.TempDir()
	script := "#!/bin/sh\ncase \"$1\" in\ncat) exec cat ;;\nbig) exec seq 1 5000 ;;\nesac\necho \"out $*\"\necho \"err $1\" >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(fake, "zfs"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out, err string
		code     int
	}
	runAll := func(t *testing.T, stdin string) []result {
		var res []result
		for _, args := range [][]string{{"create", "-o", "b=2", "-o", "a=1", "x"}, {"cat"}, {"big"}} {
			c := exec.Command("zfs", args...)
			if args[0] == "cat" {
				c.Stdin = strings.NewReader(stdin)
			}
			var o, e strings.Builder
			c.Stdout, c.Stderr = &o, &e
			err := c.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			res = append(res, result{o.String(), e.String(), code})
		}
		return res
	}
	var recorded []result
	t.Run("record", func(t *testing.T) {
		t.Setenv(envRecord, rec)
		t.Setenv(envReal, fake)
		if !useDouble(t, "") {
			t.Fatal("not recording")
		}
		recorded = runAll(t, "hello")
		if recorded[0] != (result{"out create -o b=2 -o a=1 x\n", "err create\n", 3}) || recorded[1].out != "hello" || !strings.HasSuffix(recorded[2].out, "\n5000\n") {
			t.Fatalf("through the recorder: %+v", recorded)
		}
	})
	if _, err := os.Stat(filepath.Join(rec, streamDir, "stdout-002.gz")); err != nil {
		t.Fatalf("the large output was not kept gzipped: %v", err)
	}
	t.Run("replay", func(t *testing.T) {
		t.Setenv(envRecord, "")
		useDouble(t, filepath.Join(rec, sessionFile))
		if got := runAll(t, "hello"); len(got) != 3 || got[0] != recorded[0] || got[1] != recorded[1] || got[2] != recorded[2] {
			t.Fatalf("replayed %+v, recorded %+v", got, recorded)
		}
	})
	t.Run("refusals", func(t *testing.T) {
		t.Setenv(envRecord, "")
		useDouble(t, filepath.Join(rec, sessionFile))
		// -o options in another order are the same command (go-zfs
		// orders them as a map does); another stdin, or a command out of
		// order, is refused.
		if out, err := exec.Command("zfs", "create", "-o", "a=1", "-o", "b=2", "x").CombinedOutput(); err == nil || string(out) != "out create -o b=2 -o a=1 x\nerr create\n" {
			t.Fatalf("reordered -o options: %v %q", err, out)
		}
		c := exec.Command("zfs", "cat")
		c.Stdin = strings.NewReader("HELLO")
		if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "stdin") {
			t.Fatalf("other stdin: %v %s", err, out)
		}
		state := os.Getenv(envState)
		os.Remove(filepath.Join(state, "failures.txt"))
		os.WriteFile(filepath.Join(state, "next"), []byte("1"), 0o600)
		if out, err := exec.Command("zfs", "big").CombinedOutput(); err == nil || !strings.Contains(string(out), `recorded zfs ["cat"]`) {
			t.Fatalf("out of order: %v %s", err, out)
		}
		// Replay is done: clear what the cleanup would report.
		os.Remove(filepath.Join(state, "failures.txt"))
		os.WriteFile(filepath.Join(state, "next"), []byte("3"), 0o600)
	})
}
