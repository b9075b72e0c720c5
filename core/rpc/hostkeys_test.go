package rpc

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// sshServer is a real SSH server on addr with host key hk that accepts
// any public key and then only drains connections.
func sshServer(t *testing.T, addr string, hk ssh.Signer) net.Listener {
	t.Helper()
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) { return nil, nil }}
	cfg.AddHostKey(hk)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for ch := range chans {
					ch.Reject(ssh.Prohibited, "test server")
				}
			}()
		}
	}()
	return l
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func clientKeyFile(t *testing.T) string {
	t.Helper()
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	blk, err := ssh.MarshalPrivateKey(k, "")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(p, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSSHHostKeyPinnedOnFirstUse(t *testing.T) {
	hkA, hkB := newSigner(t), newSigner(t)
	l := sshServer(t, "127.0.0.1:0", hkA)
	addr := l.Addr().String()
	u, _ := url.Parse("ssh://root@" + addr)
	known := filepath.Join(t.TempDir(), "ployz", "known_hosts")
	key := clientKeyFile(t)
	connect := func(replace bool) error {
		tun, err := NewSSHTunnel(u, SSHOptions{KeyFile: key, HostKeys: HostKeys{Path: known, Replace: replace}})
		if err != nil {
			t.Fatal(err)
		}
		defer tun.Close()
		_, err = tun.Client(context.Background())
		return err
	}

	if err := connect(false); err != nil {
		t.Fatalf("first connection: %v", err)
	}
	fi, err := os.Stat(known)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("known_hosts = %v, %v; want a 0600 file", fi, err)
	}
	if err := connect(false); err != nil {
		t.Fatalf("same key again: %v", err)
	}

	// The host comes back with another key at the same address.
	l.Close()
	l = sshServer(t, addr, hkB)
	defer l.Close()
	err = connect(false)
	var ch *HostKeyChangedError
	if !errors.As(err, &ch) {
		t.Fatalf("changed host key = %v; want refused", err)
	}
	fa, fb := ssh.FingerprintSHA256(hkA.PublicKey()), ssh.FingerprintSHA256(hkB.PublicKey())
	if !strings.Contains(err.Error(), fa) || !strings.Contains(err.Error(), fb) || !strings.Contains(err.Error(), "--accept-new-host-key") {
		t.Fatalf("refusal %q should name %s, %s and --accept-new-host-key", err, fa, fb)
	}
	b, _ := os.ReadFile(known)
	if strings.Count(string(b), "\n") != 1 {
		t.Fatalf("a refused key changed known_hosts:\n%s", b)
	}

	// Deliberately accepted: the new key replaces the old one.
	if err := connect(true); err != nil {
		t.Fatalf("--accept-new-host-key: %v", err)
	}
	if err := connect(false); err != nil {
		t.Fatalf("after replacing: %v", err)
	}
	b, _ = os.ReadFile(known)
	if strings.Count(string(b), "\n") != 1 || !strings.Contains(string(b), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hkB.PublicKey())))) {
		t.Fatalf("known_hosts after replacing:\n%s", b)
	}
}

func TestSSHHostKeysNeedAFile(t *testing.T) {
	u, _ := url.Parse("ssh://root@127.0.0.1:1")
	tun, err := NewSSHTunnel(u, SSHOptions{KeyFile: clientKeyFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	l := sshServer(t, "127.0.0.1:0", newSigner(t))
	defer l.Close()
	tun.addr = l.Addr().String()
	if _, err := tun.Client(context.Background()); err == nil || !strings.Contains(err.Error(), "no known_hosts") {
		t.Fatalf("no pin file = %v; want refused", err)
	}
}
