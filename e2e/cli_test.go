package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// operator is the ployz CLI as an operator on this host runs it, with its
// own operator store and the lab's SSH key.
type operator struct {
	store string
	key   string
	// env is added to the CLI's environment (e.g. DOCKER_CONFIG).
	env []string
	// cli, when set, is the CLI run instead of PLOYZ_BIN_DIR's (a
	// release's own CLI, which trusts that release's key).
	cli string
	// pins pins the lab Machines' SSH host keys in the CLI's known_hosts
	// before it contacts them: it trusts no unpinned key without a
	// terminal to ask on.
	pins *labPins
}

func newOperator(t testing.TB, l *lab.Lab) *operator {
	// The CLI's known_hosts sits beside its operator store.
	pins := &labPins{lab: l, hk: rpc.HostKeys{Path: filepath.Join(l.StateDir, "known_hosts")}}
	return &operator{store: filepath.Join(l.StateDir, "operator.db"), key: lab.KeyPath(l.StateDir), pins: pins}
}

// run runs bin/ployz with args and returns stdout, stderr and the exit code.
func (o *operator) run(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	return o.runCtx(context.Background(), t, args...)
}

// runCtx is run that ends (like Ctrl-C) when ctx does.
func (o *operator) runCtx(ctx context.Context, t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	o.pins.pin(t)
	cmd := exec.CommandContext(ctx, o.bin(), append([]string{"--ssh-key", o.key}, args...)...)
	cmd.Env = o.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil && ctx.Err() == nil {
		t.Fatalf("ployz %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errb.String(), code
}

// bin is the CLI the operator runs.
func (o *operator) bin() string {
	if o.cli != "" {
		return o.cli
	}
	return filepath.Join(os.Getenv(lab.EnvBinDir), "ployz")
}

// environ is the CLI's environment: this process's, its operator store
// and env.
func (o *operator) environ() []string {
	return append(append(os.Environ(), "PLOYZ_OPERATOR_STORE="+o.store), o.env...)
}

// must runs ployz and fails the test on a non-zero exit.
func (o *operator) must(t testing.TB, args ...string) string {
	t.Helper()
	out, errs, code := o.run(t, args...)
	if code != 0 {
		t.Fatalf("ployz %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// json runs ployz --json and decodes stdout into v.
func (o *operator) json(t testing.TB, v any, args ...string) {
	t.Helper()
	out := o.must(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("ployz %s: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// streamed is a ployz process whose output a test reads line by line
// while it runs.
type streamed struct {
	Stdout, Stderr <-chan string // closed when the stream ends
	cmd            *exec.Cmd
	outText        *strings.Builder
	errText        *strings.Builder
}

// stream starts ployz with args; ctx ending interrupts it (like Ctrl-C).
func (o *operator) stream(ctx context.Context, t testing.TB, args ...string) *streamed {
	t.Helper()
	o.pins.pin(t)
	bin := o.cli
	if bin == "" {
		bin = filepath.Join(os.Getenv(lab.EnvBinDir), "ployz")
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--ssh-key", o.key}, args...)...)
	cmd.Env = append(append(os.Environ(), "PLOYZ_OPERATOR_STORE="+o.store), o.env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("ployz %s: %v", strings.Join(args, " "), err)
	}
	s := &streamed{cmd: cmd, outText: &strings.Builder{}, errText: &strings.Builder{}}
	pump := func(r io.Reader, text *strings.Builder) <-chan string {
		ch := make(chan string, 1024)
		go func() {
			defer close(ch)
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				text.WriteString(sc.Text() + "\n")
				select {
				case ch <- sc.Text():
				default: // nobody reads this stream: keep only the text
				}
			}
		}()
		return ch
	}
	s.Stdout, s.Stderr = pump(outp, s.outText), pump(errp, s.errText)
	return s
}

// until reads lines from ch until one contains marker, within timeout.
func until(ch <-chan string, marker string, timeout time.Duration) bool {
	_, ok := untilLine(ch, marker, timeout)
	return ok
}

// untilLine is until that returns the line holding marker.
func untilLine(ch <-chan string, marker string, timeout time.Duration) (string, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				return "", false
			}
			if strings.Contains(l, marker) {
				return l, true
			}
		case <-deadline:
			return "", false
		}
	}
}

// wait waits for the process and returns its whole stdout, stderr and
// exit code (-1 when it ended by a signal).
func (s *streamed) wait() (string, string, int) {
	for range s.Stdout {
	}
	for range s.Stderr {
	}
	err := s.cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return s.outText.String(), s.errText.String(), code
}
