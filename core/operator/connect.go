package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ployz/ployz/core/rpc"
)

// Connect returns a client for the first of the context's connections
// whose Entry Machine answers describe_contract, trying them in order.
func Connect(ctx context.Context, c Context, o DialOptions) (*rpc.Client, Connection, error) {
	if len(c.Connections) == 0 {
		return nil, Connection{}, fmt.Errorf("context %q has no connections", c.Name)
	}
	var errs []error
	for _, conn := range c.Connections {
		cl, err := Dial(ctx, conn, o)
		if err == nil {
			return cl, conn, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", conn.URL, err))
	}
	return nil, Connection{}, fmt.Errorf("context %q: no Entry Machine answered: %w", c.Name, errors.Join(errs...))
}

// DialOptions are the operator's choices for one command's connections.
type DialOptions struct {
	// AcceptNewHostKey replaces a pinned SSH host key that changed.
	AcceptNewHostKey bool
	// AcceptHostKey is the SHA256 fingerprint(s), comma separated, an
	// unpinned host may present (--accept-host-key).
	AcceptHostKey string
	// AskHostKey asks the operator about an unpinned host's key; nil
	// without a terminal (the key is then refused unless accepted ahead).
	AskHostKey func(host string, key ssh.PublicKey) (bool, error)
	// AnswerTimeout bounds the wait for an Entry Machine's first answer
	// (describe_contract); zero means DefaultAnswerTimeout.
	AnswerTimeout time.Duration
}

// DefaultAnswerTimeout is how long Dial waits for a daemon to answer: an
// SSH handshake and the first call to a loaded or emulated Machine can
// take seconds, an unreachable one should not hold a command for minutes.
const DefaultAnswerTimeout = 20 * time.Second

// KnownHostsPath is the operator's pinned SSH host keys, next to the
// operator store (so every context and enrollment share the pins).
func KnownHostsPath() string { return filepath.Join(filepath.Dir(DefaultPath()), "known_hosts") }

// SystemKnownHostsPath is the operator's own ~/.ssh/known_hosts, which
// vouches for (or against) a host ployz has not pinned yet.
func SystemKnownHostsPath() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".ssh", "known_hosts")
}

// EnvSSHKey names the variable that selects the SSH key when neither
// --ssh-key nor the context names one: a path, or the PEM key itself (a CI
// job's secret variable, never written to disk).
const EnvSSHKey = "PLOYZ_SSH_KEY"

// SSH returns the ssh:// options for conn.
func (o DialOptions) SSH(keyFile string) rpc.SSHOptions {
	opts := rpc.SSHOptions{KeyFile: keyFile, HostKeys: rpc.HostKeys{Path: KnownHostsPath(), Replace: o.AcceptNewHostKey,
		FirstUse: rpc.FirstContact{SystemKnownHosts: SystemKnownHostsPath(), Accept: o.AcceptHostKey, Ask: o.AskHostKey}}}
	if v := os.Getenv(EnvSSHKey); keyFile == "" && v != "" {
		if strings.Contains(v, "PRIVATE KEY-----") {
			opts.Key = []byte(v)
		} else {
			opts.KeyFile = v
		}
	}
	return opts
}

// Dial opens one connection and checks that a daemon answers on it.
func Dial(ctx context.Context, conn Connection, o DialOptions) (*rpc.Client, error) {
	if err := conn.Validate(); err != nil {
		return nil, err
	}
	cl, err := rpc.DialURL(conn.URL, o.SSH(conn.SSHKey))
	if err != nil {
		return nil, err
	}
	wait := o.AnswerTimeout
	if wait <= 0 {
		wait = DefaultAnswerTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var ct rpc.Contract
	if err := rpc.InvokeInto(pctx, cl, rpc.Target{}, rpc.DescribeContract, rpc.None{}, &ct); err != nil {
		cl.Close()
		if pctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("no answer to %s within %s (a slow Machine: --connect-timeout): %w", rpc.CmdDescribeContract, wait, err)
		}
		return nil, err
	}
	return cl, nil
}
