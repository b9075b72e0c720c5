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
	"golang.org/x/crypto/ssh/knownhosts"
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

// TestSSHHostKeyFirstContact: an unpinned host's key is never trusted
// silently. Without a word from the operator it is refused, naming its
// fingerprint and --accept-host-key; ~/.ssh/known_hosts listing it pins
// it, listing another key refuses it; an accepted fingerprint or a yes on
// the terminal pins it. Once pinned, a changed key is refused.
func TestSSHHostKeyFirstContact(t *testing.T) {
	hkA, hkB := newSigner(t), newSigner(t)
	l := sshServer(t, "127.0.0.1:0", hkA)
	addr := l.Addr().String()
	u, _ := url.Parse("ssh://root@" + addr)
	known := filepath.Join(t.TempDir(), "ployz", "known_hosts")
	key := clientKeyFile(t)
	connectWith := func(replace bool, first FirstContact) error {
		tun, err := NewSSHTunnel(u, SSHOptions{KeyFile: key, HostKeys: HostKeys{Path: known, Replace: replace, FirstUse: first}})
		if err != nil {
			t.Fatal(err)
		}
		defer tun.Close()
		_, err = tun.Client(context.Background())
		return err
	}
	connect := func(replace bool) error { return connectWith(replace, FirstContact{}) }
	fa := ssh.FingerprintSHA256(hkA.PublicKey())
	pinned := func() []ssh.PublicKey {
		keys, err := HostKeys{Path: known}.Pinned(addr)
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}

	// Nobody vouched: refused, naming the fingerprint and the way to accept.
	var unknown *HostKeyUnknownError
	if err := connect(false); !errors.As(err, &unknown) || !strings.Contains(err.Error(), fa) || !strings.Contains(err.Error(), "--accept-host-key "+fa) {
		t.Fatalf("first contact without a decision = %v; want refused naming %s", err, fa)
	}
	// Asked on the terminal, and refused there.
	var asked string
	no := FirstContact{Ask: func(host string, k ssh.PublicKey) (bool, error) { asked = ssh.FingerprintSHA256(k); return false, nil }}
	if err := connectWith(false, no); err == nil || asked != fa || len(pinned()) != 0 {
		t.Fatalf("answered no = %v (asked about %q); pins %v", err, asked, pinned())
	}
	// Another fingerprint accepted ahead is not this one.
	if err := connectWith(false, FirstContact{Accept: ssh.FingerprintSHA256(hkB.PublicKey())}); !errors.As(err, &unknown) {
		t.Fatalf("another accepted fingerprint = %v; want refused", err)
	}
	// ~/.ssh/known_hosts with another key for the host refuses it.
	sys := filepath.Join(t.TempDir(), "ssh_known_hosts")
	os.WriteFile(sys, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hkB.PublicKey())+"\n"), 0o600)
	var mismatch *HostKeyMismatchError
	if err := connectWith(false, FirstContact{SystemKnownHosts: sys, Accept: fa}); !errors.As(err, &mismatch) || !strings.Contains(err.Error(), sys) {
		t.Fatalf("~/.ssh/known_hosts with another key = %v; want refused naming it", err)
	}
	if len(pinned()) != 0 {
		t.Fatalf("refused keys were pinned: %v", pinned())
	}
	// ~/.ssh/known_hosts listing this key pins it.
	os.WriteFile(sys, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hkA.PublicKey())+"\n"), 0o600)
	if err := connectWith(false, FirstContact{SystemKnownHosts: sys}); err != nil || len(pinned()) != 1 {
		t.Fatalf("key in ~/.ssh/known_hosts = %v, pins %v", err, pinned())
	}
	fi, err := os.Stat(known)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("known_hosts = %v, %v; want a 0600 file", fi, err)
	}
	// Pinned: no decision is needed any more.
	if err := connect(false); err != nil {
		t.Fatalf("same key again: %v", err)
	}
	// An accepted fingerprint, or a yes on the terminal, pins too.
	for name, first := range map[string]FirstContact{"--accept-host-key": {Accept: "SHA256:other, " + fa},
		"a yes": {Ask: func(string, ssh.PublicKey) (bool, error) { return true, nil }}} {
		if err := (HostKeys{Path: known}).Forget(addr); err != nil {
			t.Fatal(err)
		}
		if err := connectWith(false, first); err != nil || len(pinned()) != 1 {
			t.Fatalf("%s: %v, pins %v", name, err, pinned())
		}
	}

	// The host comes back with another key at the same address.
	l.Close()
	l = sshServer(t, addr, hkB)
	defer l.Close()
	// A first-contact decision does not override a pin.
	fb := ssh.FingerprintSHA256(hkB.PublicKey())
	err = connectWith(false, FirstContact{Accept: fb, Ask: func(string, ssh.PublicKey) (bool, error) { return true, nil }})
	var ch *HostKeyChangedError
	if !errors.As(err, &ch) {
		t.Fatalf("changed host key = %v; want refused", err)
	}
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

// The lab pins the keys it read from its own Machines, and forgets exactly
// the Machines it removes: a Machine re-created at a forgotten address is
// pinned anew on first use, while another host's changed key is still
// refused with both fingerprints.
func TestSSHHostKeysPinAndForget(t *testing.T) {
	lab1, lab2, other := newSigner(t), newSigner(t), newSigner(t)
	known := filepath.Join(t.TempDir(), "ployz", "known_hosts")
	// The operator says yes to every first contact here.
	hk := HostKeys{Path: known, FirstUse: FirstContact{Ask: func(string, ssh.PublicKey) (bool, error) { return true, nil }}}
	key := clientKeyFile(t)
	connect := func(addr string) error {
		u, _ := url.Parse("ssh://root@" + addr)
		tun, err := NewSSHTunnel(u, SSHOptions{KeyFile: key, HostKeys: hk})
		if err != nil {
			t.Fatal(err)
		}
		defer tun.Close()
		_, err = tun.Client(context.Background())
		return err
	}

	// serve starts a server closed when the test ends.
	serve := func(addr string, hk ssh.Signer) net.Listener {
		l := sshServer(t, addr, hk)
		t.Cleanup(func() { l.Close() })
		return l
	}
	labL := serve("127.0.0.1:0", lab1)
	labAddr := labL.Addr().String()
	otherL := serve("127.0.0.1:0", other)
	otherAddr := otherL.Addr().String()
	if err := connect(otherAddr); err != nil {
		t.Fatalf("first use of another host: %v", err)
	}

	// Pinned ahead with the key it will show: no first-use pinning needed,
	// and a pin replaces what stood for that address before.
	if err := hk.Pin(labAddr, newSigner(t).PublicKey()); err != nil {
		t.Fatal(err)
	}
	if err := hk.Pin(labAddr, newSigner(t).PublicKey(), lab1.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if err := connect(labAddr); err != nil {
		t.Fatalf("key pinned by the lab: %v", err)
	}
	if err := hk.Pin(labAddr); err == nil {
		t.Fatal("Pin with no keys succeeded")
	}

	// Re-created at the same address with a new key: refused until the
	// lab forgets the address, then pinned on first use (with the
	// operator's yes).
	labL.Close()
	serve(labAddr, lab2)
	var ch *HostKeyChangedError
	if err := connect(labAddr); !errors.As(err, &ch) {
		t.Fatalf("re-created lab Machine before Forget = %v; want refused", err)
	}
	if err := hk.Forget(labAddr); err != nil {
		t.Fatal(err)
	}
	if err := connect(labAddr); err != nil {
		t.Fatalf("after Forget: %v", err)
	}

	// The other host's pin survived: its changed key is refused, naming both.
	otherL.Close()
	serve(otherAddr, newSigner(t))
	err := connect(otherAddr)
	if !errors.As(err, &ch) || !strings.Contains(err.Error(), ssh.FingerprintSHA256(other.PublicKey())) {
		t.Fatalf("another host's changed key after Forget = %v; want refused naming its pinned key", err)
	}

	if err := (HostKeys{Path: filepath.Join(t.TempDir(), "none")}).Forget(labAddr); err != nil {
		t.Fatalf("Forget without a file: %v", err)
	}
}

// A key given as material (a CI secret) logs in like a key file; a
// malformed one is refused saying it was material, not a file.
func TestSSHKeyMaterial(t *testing.T) {
	host := newSigner(t)
	l := sshServer(t, "127.0.0.1:0", host)
	t.Cleanup(func() { l.Close() })
	u, _ := url.Parse("ssh://root@" + l.Addr().String())
	pemKey, err := os.ReadFile(clientKeyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	hk := HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	if err := hk.Pin(l.Addr().String(), host.PublicKey()); err != nil {
		t.Fatal(err)
	}
	tun, err := NewSSHTunnel(u, SSHOptions{Key: pemKey, KeyFile: "/nonexistent", HostKeys: hk})
	if err != nil {
		t.Fatal(err)
	}
	defer tun.Close()
	if _, err := tun.Client(context.Background()); err != nil {
		t.Fatalf("key material: %v", err)
	}
	if _, err := NewSSHTunnel(u, SSHOptions{Key: []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n"), HostKeys: hk}); err == nil || !strings.Contains(err.Error(), "material") {
		t.Fatalf("bad material = %v", err)
	}
}

func TestSSHOptionsFingerprint(t *testing.T) {
	key := clientKeyFile(t)
	fp := SSHOptions{KeyFile: key}.Fingerprint()
	if !strings.HasPrefix(fp, "SHA256:") {
		t.Fatalf("fingerprint %q", fp)
	}
	b, _ := os.ReadFile(key)
	if got := (SSHOptions{Key: b, KeyFile: "/nonexistent"}).Fingerprint(); got != fp {
		t.Fatalf("key material %q, file %q", got, fp)
	}
	if got := (SSHOptions{KeyFile: "/nonexistent"}).Fingerprint(); got != "" {
		t.Fatalf("missing key: %q", got)
	}
}
