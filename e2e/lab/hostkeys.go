package lab

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// HostKeys reads the SSH host keys Machine name's sshd presents, through
// the lab's own channel to it (Docker, or the VM's console login), so the
// operator can pin them before the first SSH connection instead of
// trusting whatever answers first at a reused lab address.
func (l *Lab) HostKeys(ctx context.Context, name string) ([]ssh.PublicKey, error) {
	// The keys exist once systemd has finished booting: the unit that
	// generates them runs before ssh.service.
	out, err := l.Exec(ctx, name, "sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub")
	if err != nil {
		return nil, fmt.Errorf("host keys of %s: %w", name, err)
	}
	var keys []ssh.PublicKey
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("host keys of %s: %q: %w", name, line, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("host keys of %s: none under /etc/ssh", name)
	}
	return keys, nil
}

// Addrs is the lab address of every Machine, for forgetting their pins.
func (l *Lab) Addrs() []string {
	addrs := make([]string, 0, len(l.Machines))
	for _, m := range l.Machines {
		if m.IP.IsValid() {
			addrs = append(addrs, m.IP.String())
		}
	}
	return addrs
}
