package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/term"
)

// Exec runs cmd inside Machine name and returns its combined, trimmed
// output. A non-zero exit is an error that carries the output.
func (l *Lab) Exec(ctx context.Context, name string, cmd ...string) (string, error) {
	m, err := l.Machine(name)
	if err != nil {
		return "", err
	}
	if l.VM {
		return l.vmExec(ctx, name, cmd)
	}
	c := exec.CommandContext(ctx, "docker", append([]string{"exec", m.Container}, cmd...)...)
	out, err := c.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		return s, fmt.Errorf("%s: %s: %w: %s", name, strings.Join(cmd, " "), err, s)
	}
	return s, nil
}

// ExecInteractive runs cmd inside Machine name wired to this process's
// terminal, for `ployz lab exec`.
func (l *Lab) ExecInteractive(ctx context.Context, name string, stdin io.Reader, stdout, stderr io.Writer, cmd ...string) error {
	m, err := l.Machine(name)
	if err != nil {
		return err
	}
	args := []string{"exec", "-i"}
	tty := false
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		args, tty = append(args, "-t"), true
	}
	c := exec.CommandContext(ctx, "docker", append(append(args, m.Container), cmd...)...)
	if l.VM {
		ssh, _ := l.SSHArgs(name)
		if tty {
			ssh = append(ssh[:1], append([]string{"-t"}, ssh[1:]...)...)
		}
		c = exec.CommandContext(ctx, ssh[0], append(ssh[1:], shellJoin(cmd))...)
	}
	c.Stdin, c.Stdout, c.Stderr = stdin, stdout, stderr
	return c.Run()
}

// WaitBooted waits until Machine name's systemd has finished booting
// (running or degraded) and its own dockerd answers.
func (l *Lab) WaitBooted(ctx context.Context, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		state, _ := l.Exec(ctx, name, "systemctl", "is-system-running")
		last = "systemd " + state
		if state == "running" || state == "degraded" {
			if _, err := l.Exec(ctx, name, "docker", "info", "--format", "{{.ServerVersion}}"); err == nil {
				return nil
			}
			last = "dockerd not answering"
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("machine %s did not boot within %s (last: %s)", name, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// FailedUnits lists the systemd units that failed on Machine name.
func (l *Lab) FailedUnits(ctx context.Context, name string) ([]string, error) {
	out, err := l.Exec(ctx, name, "systemctl", "list-units", "--failed", "--plain", "--no-legend", "--no-pager")
	if err != nil {
		return nil, err
	}
	var units []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			units = append(units, f[0])
		}
	}
	return units, nil
}

// LoadImage copies a host image into the Docker of each named Machine (all
// when none is named) with `docker save | docker load`.
func (l *Lab) LoadImage(ctx context.Context, image string, names ...string) error {
	if len(names) == 0 {
		for _, m := range l.Machines {
			names = append(names, m.Name)
		}
	}
	var errs []error
	for _, n := range names {
		m, err := l.Machine(n)
		if err != nil {
			return err
		}
		load := pipe
		if l.VM {
			load = l.vmPipe(n)
		}
		if err := load(ctx, []string{"save", image}, []string{"exec", "-i", m.Container, "docker", "load", "-q"}); err != nil {
			errs = append(errs, fmt.Errorf("load %s into %s: %w", image, n, err))
		}
	}
	return errors.Join(errs...)
}
