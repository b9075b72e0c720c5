package rpc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// FirstContact decides the key of a host nothing is pinned for; nothing
// is trusted silently. In order: the operator's own SSH known_hosts (a
// match pins the key, a different key there refuses it), then a
// fingerprint the operator accepted ahead (--accept-host-key), then a
// question on the terminal; else the connection is refused, naming the
// fingerprint and how to accept it.
type FirstContact struct {
	// SystemKnownHosts is ~/.ssh/known_hosts ("" or a missing file: none).
	SystemKnownHosts string
	// Accept is the SHA256 fingerprints (comma separated) the operator
	// accepts for an unpinned host.
	Accept string
	// Ask shows the fingerprint and asks whether to trust it; nil when
	// there is no terminal to ask on.
	Ask func(host string, key ssh.PublicKey) (bool, error)
}

// HostKeyUnknownError refuses an unpinned host's key nobody vouched for.
type HostKeyUnknownError struct {
	Host  string
	Shown string // the SHA256 fingerprint it presented
}

func (e *HostKeyUnknownError) Error() string {
	return fmt.Sprintf("ssh host key of %s is not known: it presents %s, and neither ployz's pins nor ~/.ssh/known_hosts know it. "+
		"Compare it with the Machine's own (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub on its console), then rerun in a terminal to be asked, "+
		"or with --accept-host-key %s (env PLOYZ_ACCEPT_HOST_KEY)", e.Host, e.Shown, e.Shown)
}

// HostKeyMismatchError refuses a key that ~/.ssh/known_hosts knows
// another key for.
type HostKeyMismatchError struct {
	Host, Shown, Path string
	Known             []string
}

func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("ssh host key of %s is %s, but %s has %s for it. This may be an attacker between you and the Machine; "+
		"if it was re-installed, fix %s (ssh-keygen -R HOST) and connect again", e.Host, e.Shown, e.Path, strings.Join(e.Known, ", "), e.Path)
}

// decide is the first contact with hostname, which shows key; nil means
// pin it.
func (f FirstContact) decide(hostname string, remote net.Addr, key ssh.PublicKey) error {
	shown := ssh.FingerprintSHA256(key)
	if known, err := f.system(hostname, remote, key); known || err != nil {
		return err
	}
	for _, fp := range strings.Split(f.Accept, ",") {
		if fp = strings.TrimSpace(fp); fp != "" && fp == shown {
			return nil
		}
	}
	if f.Ask != nil {
		ok, err := f.Ask(hostname, key)
		if err != nil {
			return fmt.Errorf("ssh host key of %s: %w", hostname, err)
		}
		if ok {
			return nil
		}
		return fmt.Errorf("ssh host key of %s (%s): not trusted", hostname, shown)
	}
	return &HostKeyUnknownError{Host: hostname, Shown: shown}
}

// system looks key up in SystemKnownHosts: known when it lists key for
// hostname, an error when it lists only other keys. A file that cannot be
// read or parsed vouches for nothing (the next steps still need the
// operator's word).
func (f FirstContact) system(hostname string, remote net.Addr, key ssh.PublicKey) (bool, error) {
	if f.SystemKnownHosts == "" {
		return false, nil
	}
	if _, err := os.Stat(f.SystemKnownHosts); err != nil {
		return false, nil
	}
	check, err := knownhosts.New(f.SystemKnownHosts)
	if err != nil {
		return false, nil
	}
	err = check(hostname, remote, key)
	var ke *knownhosts.KeyError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ke) && len(ke.Want) > 0:
		e := &HostKeyMismatchError{Host: hostname, Shown: ssh.FingerprintSHA256(key), Path: f.SystemKnownHosts}
		for _, w := range ke.Want {
			e.Known = append(e.Known, ssh.FingerprintSHA256(w.Key))
		}
		return false, e
	}
	return false, nil
}
