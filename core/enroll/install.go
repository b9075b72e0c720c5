// Package enroll is the operator side of forming a Cluster: it installs
// Ployz on a Machine over SSH when missing, allocates the Machine's subnet
// from the operator's history, and drives initialize or publish + join.
// Every step is planned here, on the operator's computer (docs/architecture.md bet 10).
package enroll

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ployz/ployz/packaging"
)

// Binaries installed on a Machine, looked up beside the running ployz.
var Binaries = []string{"ployzd", "ployz", "ployz-dns", "ployz-ingress-caddy", "ployz-logstore", "ployz-metrics", "ployz-volume-zfs"}

// Progress receives one line per step.
type Progress func(format string, args ...any)

// EnsureInstalled makes sure the Machine behind c has a supported Docker
// (EnsureDocker), installs ployzd, the plugins and the systemd units there
// when ployzd is missing, then enables and starts
// ployz.service and waits until its socket answers. binDir holds the
// binaries to upload.
func EnsureInstalled(ctx context.Context, c *ssh.Client, binDir string, progress Progress) error {
	if err := EnsureDocker(ctx, c, progress); err != nil {
		return err
	}
	if _, err := run(c, "test -x /usr/local/bin/ployzd", nil); err != nil {
		progress("installing Ployz (binaries from %s)", binDir)
		for _, b := range Binaries {
			data, err := os.ReadFile(filepath.Join(binDir, b))
			if err != nil {
				if b == "ployzd" {
					return fmt.Errorf("install: %w (build with `make build`)", err)
				}
				continue // plugins are optional until their issues land
			}
			dst := "/usr/local/bin/" + b
			if _, err := run(c, fmt.Sprintf("cat > %s.tmp && chmod 0755 %s.tmp && mv %s.tmp %s", dst, dst, dst, dst), data); err != nil {
				return fmt.Errorf("install %s: %w", b, err)
			}
		}
		units, _ := fs.Glob(packaging.Files, "systemd/*.service")
		for _, u := range units {
			data, _ := packaging.Files.ReadFile(u)
			dst := "/etc/systemd/system/" + filepath.Base(u)
			if _, err := run(c, "cat > "+dst, data); err != nil {
				return fmt.Errorf("install %s: %w", dst, err)
			}
		}
		if _, err := run(c, "systemctl daemon-reload", nil); err != nil {
			return err
		}
	}
	if out, err := run(c, "systemctl is-active ployz.service", nil); err != nil || strings.TrimSpace(out) != "active" {
		progress("starting ployz.service")
		if _, err := run(c, "systemctl enable --now ployz.service", nil); err != nil {
			return fmt.Errorf("start ployz.service: %w", err)
		}
	}
	return waitDaemonSocket(ctx, c, progress)
}

// socketWait bounds the wait for ployzd's socket. A slow Machine (a small
// board, an emulated VM, a loaded host) can take minutes to start ployzd
// the first time, so the wait goes on while the unit is still starting
// or running and ends at once when systemd says it failed.
const socketWait = 3 * time.Minute

// waitDaemonSocket waits for ployzd to open its socket, saying so every
// 15 s, and names ployzd's last log lines when it gives up.
func waitDaemonSocket(ctx context.Context, c *ssh.Client, progress Progress) error {
	start := time.Now()
	said := start
	fail := func(why string) error {
		out, _ := run(c, "journalctl -u ployz.service -n 20 --no-pager", nil)
		return fmt.Errorf("ployzd %s; its last log lines:\n%s", why, out)
	}
	for {
		if _, err := run(c, "test -S /run/ployz/ployz.sock", nil); err == nil {
			return nil
		}
		if out, _ := run(c, "systemctl is-failed ployz.service", nil); strings.TrimSpace(out) == "failed" {
			return fail("failed before it opened /run/ployz/ployz.sock")
		}
		if time.Since(start) > socketWait {
			return fail(fmt.Sprintf("did not open /run/ployz/ployz.sock within %s", socketWait))
		}
		if time.Since(said) >= 15*time.Second {
			said = time.Now()
			progress("waiting for ployzd to open its socket (%s so far)", time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// run executes cmd in a new SSH session with stdin as its input.
func run(c *ssh.Client, cmd string, stdin []byte) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	if stdin != nil {
		s.Stdin = bytes.NewReader(stdin)
	}
	out, err := s.CombinedOutput(cmd)
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", cmd, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
