package lab

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// KeyPath is the private half of the lab's SSH key under a state dir; the
// public half, KeyPath+".pub", is every Machine's root authorized_keys.
func KeyPath(stateDir string) string { return filepath.Join(stateDir, "id_ed25519") }

// ensureKey creates the lab's SSH key pair once and returns the public key's path.
func ensureKey(stateDir string) (string, error) {
	priv := KeyPath(stateDir)
	pub := priv + ".pub"
	if _, err := os.Stat(pub); err == nil {
		return pub, nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("lab state dir: %w", err)
	}
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	block, err := ssh.MarshalPrivateKey(sk, "ployz lab")
	if err != nil {
		return "", err
	}
	spk, err := ssh.NewPublicKey(pk)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(priv, pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(pub, ssh.MarshalAuthorizedKey(spk), 0o644); err != nil {
		return "", err
	}
	return pub, nil
}

// SSHArgs returns the ssh command line that logs into Machine name as root
// with the lab's key, for `ployz lab ssh`.
func (l *Lab) SSHArgs(name string) ([]string, error) {
	m, err := l.Machine(name)
	if err != nil {
		return nil, err
	}
	return []string{"ssh", "-i", KeyPath(l.StateDir),
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"root@" + m.IP.String()}, nil
}

// SSH runs cmd on Machine name over real SSH with the lab's key, from this
// host across the lab network, and returns its output.
func (l *Lab) SSH(ctx context.Context, name, cmd string) (string, error) {
	client, err := l.dial(ctx, name)
	if err != nil {
		return "", err
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return "", err
	}
	defer sess.Close()
	out, err := sess.CombinedOutput(cmd)
	if err != nil {
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("ssh %s: %q exited %d: %s", name, cmd, ee.ExitStatus(), out)
		}
		return string(out), fmt.Errorf("ssh %s: %w", name, err)
	}
	return string(out), nil
}
