package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeys pins the SSH host keys of Machines in a known_hosts-format
// file: a host's first key is pinned once FirstUse vouches for it (or the
// lab pinned it ahead with Pin), and a different key later is refused
// unless Replace is set (`--accept-new-host-key`).
type HostKeys struct {
	// Path is the known_hosts file, created 0600 on first use.
	Path string
	// Replace lets a changed key replace the pinned one, deliberately.
	Replace bool
	// FirstUse decides the key of a host nothing is pinned for; its zero
	// value refuses every such key.
	FirstUse FirstContact
}

// HostKeyChangedError is the refusal of a host key that differs from the
// pinned one; its message names both fingerprints.
type HostKeyChangedError struct {
	Host   string
	Pinned []string // SHA256 fingerprints on file
	Shown  string   // SHA256 fingerprint the host presented
	Path   string
}

func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("ssh host key of %s changed: pinned %s, presented %s (pins in %s). "+
		"This may be an attacker between you and the Machine; if you re-installed it, rerun with --accept-new-host-key",
		e.Host, strings.Join(e.Pinned, ", "), e.Shown, e.Path)
}

// hostKeysMu serializes pinning within one process (fan-out dials).
var hostKeysMu sync.Mutex

// Callback is the ssh.HostKeyCallback that enforces the pins.
func (h HostKeys) Callback() ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if h.Path == "" {
			return errors.New("ssh: no known_hosts file to check host keys against")
		}
		hostKeysMu.Lock()
		defer hostKeysMu.Unlock()
		if err := ensureFile(h.Path); err != nil {
			return err
		}
		check, err := knownhosts.New(h.Path)
		if err != nil {
			return fmt.Errorf("known hosts %s: %w", h.Path, err)
		}
		err = check(hostname, remote, key)
		var ke *knownhosts.KeyError
		if err == nil || !errors.As(err, &ke) {
			return err
		}
		if len(ke.Want) > 0 && !h.Replace {
			e := &HostKeyChangedError{Host: hostname, Shown: ssh.FingerprintSHA256(key), Path: h.Path}
			for _, w := range ke.Want {
				e.Pinned = append(e.Pinned, ssh.FingerprintSHA256(w.Key))
			}
			return e
		}
		if len(ke.Want) == 0 {
			if err := h.FirstUse.decide(hostname, remote, key); err != nil {
				return err
			}
		}
		return h.pin(hostname, key)
	}
}

// pin records key for hostname, dropping any key pinned for it before.
func (h HostKeys) pin(hostname string, key ssh.PublicKey) error {
	host := knownhosts.Normalize(hostname)
	return h.rewrite([]string{host}, []string{knownhosts.Line([]string{host}, key)})
}

// Pin records keys for addr (host or host:port), replacing whatever was
// pinned for it. It is for a caller that learned the keys over a channel
// it already trusts: the lab reads its own Machines' keys through Docker,
// so a lab Machine re-created at the same address asks nobody to accept it.
func (h HostKeys) Pin(addr string, keys ...ssh.PublicKey) error {
	if len(keys) == 0 {
		return fmt.Errorf("known hosts %s: no keys to pin for %s", h.Path, addr)
	}
	host := knownhosts.Normalize(addr)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, knownhosts.Line([]string{host}, k))
	}
	hostKeysMu.Lock()
	defer hostKeysMu.Unlock()
	if err := ensureFile(h.Path); err != nil {
		return err
	}
	return h.rewrite([]string{host}, lines)
}

// Forget drops every pin of addrs (host or host:port) and nothing else:
// the lab forgets the Machines it removes. A missing file has nothing to
// forget.
func (h HostKeys) Forget(addrs ...string) error {
	hosts := make([]string, 0, len(addrs))
	for _, a := range addrs {
		hosts = append(hosts, knownhosts.Normalize(a))
	}
	hostKeysMu.Lock()
	defer hostKeysMu.Unlock()
	if _, err := os.Stat(h.Path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return h.rewrite(hosts, nil)
}

// rewrite replaces the file with its lines minus those naming any of
// hosts, plus add, through a rename so a reader never sees half a file.
func (h HostKeys) rewrite(hosts []string, add []string) error {
	old, err := os.ReadFile(h.Path)
	if err != nil {
		return fmt.Errorf("known hosts %s: %w", h.Path, err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && slices.ContainsFunc(hosts, func(host string) bool { return containsHost(f[0], host) }) {
			continue
		}
		out.WriteString(line + "\n")
	}
	for _, l := range add {
		out.WriteString(l + "\n")
	}
	tmp := h.Path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o600); err != nil {
		return fmt.Errorf("known hosts %s: %w", h.Path, err)
	}
	if err := os.Rename(tmp, h.Path); err != nil {
		return fmt.Errorf("known hosts %s: %w", h.Path, err)
	}
	return nil
}

func containsHost(field, host string) bool {
	for _, h := range strings.Split(field, ",") {
		if h == host {
			return true
		}
	}
	return false
}

func ensureFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("known hosts %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return fmt.Errorf("known hosts %s: %w", path, err)
	}
	return f.Close()
}

// Pinned returns the keys pinned for addr (host or host:port), none when
// the file or the host is missing.
func (h HostKeys) Pinned(addr string) ([]ssh.PublicKey, error) {
	host := knownhosts.Normalize(addr)
	b, err := os.ReadFile(h.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("known hosts %s: %w", h.Path, err)
	}
	var keys []ssh.PublicKey
	for rest := b; len(rest) > 0; {
		_, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("known hosts %s: %w", h.Path, err)
		}
		rest = next
		if slices.Contains(hosts, host) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// Trust pins keys for addr when nothing is pinned for it yet, and accepts
// them when they include a pinned key; keys that share none with the pins
// are refused like a changed host key. It is for keys that arrive with a
// document the operator chose (an imported context), which may add pins but
// never silently replace one.
func (h HostKeys) Trust(addr string, keys ...ssh.PublicKey) error {
	pinned, err := h.Pinned(addr)
	if err != nil {
		return err
	}
	if len(pinned) == 0 {
		return h.Pin(addr, keys...)
	}
	for _, p := range pinned {
		for _, k := range keys {
			if bytes.Equal(p.Marshal(), k.Marshal()) {
				return nil
			}
		}
	}
	e := &HostKeyChangedError{Host: addr, Path: h.Path}
	for _, p := range pinned {
		e.Pinned = append(e.Pinned, ssh.FingerprintSHA256(p))
	}
	var shown []string
	for _, k := range keys {
		shown = append(shown, ssh.FingerprintSHA256(k))
	}
	e.Shown = strings.Join(shown, ", ")
	return e
}
