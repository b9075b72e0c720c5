package operator

import (
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"
)

// Every ssh:// connection of the CLI decides a new host's key from the
// operator's ~/.ssh/known_hosts, --accept-host-key and the terminal
// question: none of them is left out on the way to the tunnel.
func TestSSHOptionsCarryFirstContact(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv(EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	asked := false
	o := DialOptions{AcceptHostKey: "SHA256:abc", AskHostKey: func(string, ssh.PublicKey) (bool, error) { asked = true; return false, nil }}
	hk := o.SSH("").HostKeys
	if hk.Path != KnownHostsPath() || hk.FirstUse.SystemKnownHosts != filepath.Join(home, ".ssh", "known_hosts") || hk.FirstUse.Accept != "SHA256:abc" || hk.FirstUse.Ask == nil {
		t.Fatalf("host keys %+v", hk)
	}
	if _, _ = hk.FirstUse.Ask("h", nil); !asked {
		t.Fatal("the terminal question is not the one given")
	}
	if hk := (DialOptions{}).SSH("").HostKeys; hk.FirstUse.Accept != "" || hk.FirstUse.Ask != nil {
		t.Fatalf("without a flag or terminal: %+v, want nothing vouched", hk.FirstUse)
	}
}
