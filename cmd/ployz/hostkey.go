package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"
)

// askHostKey is the question about an unpinned host's SSH key, on the
// terminal; nil when stdin or stderr is not one (a script or CI), so such
// a key is refused unless --accept-host-key names it.
func askHostKey(in, out *os.File) func(string, ssh.PublicKey) (bool, error) {
	if !term.IsTerminal(int(in.Fd())) || !term.IsTerminal(int(out.Fd())) {
		return nil
	}
	rd := bufio.NewReader(in)
	return func(host string, key ssh.PublicKey) (bool, error) { return confirmHostKey(rd, out, host, key) }
}

// confirmHostKey shows host's key fingerprint and reads yes or no.
func confirmHostKey(in *bufio.Reader, out io.Writer, host string, key ssh.PublicKey) (bool, error) {
	fmt.Fprintf(out, "The SSH host key of %s is not known to ployz or ~/.ssh/known_hosts.\n"+
		"%s key fingerprint is %s.\n"+
		"Compare it with the Machine's own (ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub on its console).\n"+
		"Trust it and pin it? [y/N] ", host, key.Type(), ssh.FingerprintSHA256(key), keyFileType(key.Type()))
	line, err := in.ReadString('\n')
	if err != nil && line == "" {
		return false, fmt.Errorf("no answer: %w", err)
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// keyFileType is the host key file's part of the name for an SSH key type.
func keyFileType(t string) string {
	switch {
	case strings.Contains(t, "ed25519"):
		return "ed25519"
	case strings.Contains(t, "ecdsa"):
		return "ecdsa"
	}
	return "rsa"
}
