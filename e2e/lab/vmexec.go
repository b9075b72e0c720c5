package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// vmExec is Exec on a VM Machine: the command over SSH, quoted for the
// remote shell, with Exec's output and error conventions.
func (l *Lab) vmExec(ctx context.Context, name string, cmd []string) (string, error) {
	c, err := l.dial(ctx, name)
	if err != nil {
		return "", err
	}
	defer c.Close()
	sess, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	out, err := sess.CombinedOutput(shellJoin(cmd))
	s := strings.TrimSpace(string(out))
	if err != nil {
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			err = &exitError{code: ee.ExitStatus()}
		}
		return s, fmt.Errorf("%s: %s: %w: %s", name, strings.Join(cmd, " "), err, s)
	}
	return s, nil
}

// exitError carries a remote command's exit status as an *exec.ExitError
// would, so pingVerdict and callers read both kinds of Machine alike.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode is the remote command's exit status.
func (e *exitError) ExitCode() int { return e.code }

// dial opens an SSH client to Machine name with the lab's key.
func (l *Lab) dial(ctx context.Context, name string) (*ssh.Client, error) {
	m, err := l.Machine(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(KeyPath(l.StateDir))
	if err != nil {
		return nil, fmt.Errorf("lab ssh key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("lab ssh key: %w", err)
	}
	cfg := &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // lab Machines mint host keys at boot
		Timeout:         10 * time.Second,
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(m.IP.String(), "22"))
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", name, err)
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, m.IP.String(), cfg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("ssh %s: %w", name, err)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// vmPipe returns a pipe function that streams `docker from...` on the host
// into `docker load` on VM Machine name over SSH.
func (l *Lab) vmPipe(name string) func(ctx context.Context, from, _ []string) error {
	return func(ctx context.Context, from, _ []string) error {
		c, err := l.dial(ctx, name)
		if err != nil {
			return err
		}
		defer c.Close()
		sess, err := c.NewSession()
		if err != nil {
			return err
		}
		defer sess.Close()
		src := exec.CommandContext(ctx, "docker", from...)
		var srcErr bytes.Buffer
		src.Stderr = &srcErr
		if sess.Stdin, err = src.StdoutPipe(); err != nil {
			return err
		}
		if err := src.Start(); err != nil {
			return err
		}
		out, lerr := sess.CombinedOutput("docker load -q")
		werr := src.Wait()
		if lerr != nil {
			return fmt.Errorf("ssh %s: docker load: %w: %s", name, lerr, out)
		}
		if werr != nil {
			return fmt.Errorf("docker %s: %w: %s", strings.Join(from, " "), werr, srcErr.String())
		}
		return nil
	}
}

// vmPower powers VM Machine m off, or boots it.
func (l *Lab) vmPower(ctx context.Context, m *Machine, on bool) error {
	v, err := openVM(l.Name)
	if err != nil || v == nil {
		return fmt.Errorf("lab %s: VM record: %v", l.Name, err)
	}
	v.Lab = l
	if !on {
		return v.powerOff(ctx, m)
	}
	if v.pid(m) != 0 {
		return nil
	}
	return v.boot(ctx, m)
}

// vmLink sets Machine name's tap on the host up or down: a cable plugged
// in or pulled, the VM itself untouched.
func (l *Lab) vmLink(ctx context.Context, name string, up bool) error {
	m, err := l.Machine(name)
	if err != nil {
		return err
	}
	v, err := openVM(l.Name)
	if err != nil || v == nil {
		return fmt.Errorf("lab %s: VM record: %v", l.Name, err)
	}
	state, what := "down", "partition"
	if up {
		state, what = "up", "heal"
	}
	if err := run(ctx, "ip", "link", "set", v.tap(m), state); err != nil {
		return fmt.Errorf("%s %s: %w", what, name, err)
	}
	return nil
}

// shellJoin quotes argv for a POSIX shell.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@%+") == "" {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
