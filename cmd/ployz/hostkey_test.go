package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// The question names the host and the fingerprint; only y or yes trusts.
func TestConfirmHostKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]bool{"y\n": true, "YES\n": true, "\n": false, "n\n": false, "sure\n": false} {
		var out strings.Builder
		got, err := confirmHostKey(bufio.NewReader(strings.NewReader(answer)), &out, "192.0.2.10:22", key)
		if err != nil || got != want {
			t.Errorf("answer %q: %v, %v; want %v", answer, got, err, want)
		}
		if s := out.String(); !strings.Contains(s, "192.0.2.10:22") || !strings.Contains(s, ssh.FingerprintSHA256(key)) || !strings.Contains(s, "ssh_host_ed25519_key.pub") {
			t.Errorf("question %q", s)
		}
	}
	if ok, err := confirmHostKey(bufio.NewReader(strings.NewReader("")), &strings.Builder{}, "h", key); ok || err == nil {
		t.Errorf("no answer at all: %v, %v; want refused with an error", ok, err)
	}
}
