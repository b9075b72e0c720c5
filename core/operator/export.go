package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/ployz/ployz/core/rpc"
)

// ExportVersion is the format of an exported context. Readers ignore
// fields they do not know, so later versions only add fields.
const ExportVersion = 1

// EnvContext names the variable that holds an exported context for a
// command to use without importing it: a CI job's way in.
const EnvContext = "PLOYZ_CONTEXT"

// Export is a context as a teammate or a CI job receives it: the
// connections and the SSH host keys pinned for them, never a private key
// or a key path of this computer.
type Export struct {
	Version     int          `json:"ployz_context"`
	Name        string       `json:"name"`
	Network     string       `json:"network,omitempty"`
	Connections []Connection `json:"connections"`
	// HostKeys are known_hosts lines for the ssh:// connections' hosts.
	HostKeys []string `json:"host_keys,omitempty"`
}

// ExportContext returns the named context with the host keys hk pins for
// its ssh:// connections. A connection whose host has no pin is refused:
// the receiver would have to trust whatever answers first.
func ExportContext(c Context, hk rpc.HostKeys) (Export, error) {
	e := Export{Version: ExportVersion, Name: c.Name, Network: c.Network}
	for _, conn := range c.Connections {
		e.Connections = append(e.Connections, Connection{URL: conn.URL})
		addr, ok := sshAddr(conn.URL)
		if !ok {
			continue
		}
		keys, err := hk.Pinned(addr)
		if err != nil {
			return Export{}, err
		}
		if len(keys) == 0 {
			return Export{}, fmt.Errorf("context %q: connection %s has no pinned host key in %s (connect once, e.g. `ployz --context %s machine ls`, then export)", c.Name, conn.URL, hk.Path, c.Name)
		}
		for _, k := range keys {
			e.HostKeys = append(e.HostKeys, knownhosts.Line([]string{knownHostsHost(addr)}, k))
		}
	}
	return e, nil
}

// ParseExport reads an exported context, refusing a malformed one with the
// field at fault; nothing is changed by a refusal.
func ParseExport(b []byte) (Export, error) {
	var e Export
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&e); err != nil {
		return Export{}, fmt.Errorf("exported context: not a JSON document from `ployz ctx export`: %w", err)
	}
	if err := e.validate(); err != nil {
		return Export{}, fmt.Errorf("exported context: %w", err)
	}
	return e, nil
}

func (e Export) validate() error {
	if e.Version != ExportVersion {
		return fmt.Errorf("ployz_context: %d is not a version this CLI reads (want %d)", e.Version, ExportVersion)
	}
	if err := validContextName(e.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if len(e.Connections) == 0 {
		return errors.New("connections: empty (a context needs at least one way to reach a Machine)")
	}
	hosts := map[string]bool{}
	for i, c := range e.Connections {
		if c.SSHKey != "" {
			return fmt.Errorf("connections[%d].ssh_key: an exported context carries no key path (set %s or --ssh-key)", i, EnvSSHKey)
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("connections[%d]: %w", i, err)
		}
		if addr, ok := sshAddr(c.URL); ok {
			hosts[knownHostsHost(addr)] = true
		}
	}
	pinned := map[string]bool{}
	for i, line := range e.HostKeys {
		_, hs, _, _, _, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil {
			return fmt.Errorf("host_keys[%d]: %w", i, err)
		}
		for _, h := range hs {
			if !hosts[h] {
				return fmt.Errorf("host_keys[%d]: host %s is none of the connections' hosts", i, h)
			}
			pinned[h] = true
		}
	}
	for h := range hosts {
		if !pinned[h] {
			return fmt.Errorf("host_keys: no key for %s (an ssh:// connection needs its host key)", h)
		}
	}
	return nil
}

// Trust adds the export's host keys to hk: a host with no pin gets the
// export's keys; a host pinned to other keys is refused, naming both.
func (e Export) Trust(hk rpc.HostKeys) error {
	byHost := map[string][]ssh.PublicKey{}
	var order []string
	for _, line := range e.HostKeys {
		_, hs, k, _, _, err := ssh.ParseKnownHosts([]byte(line))
		if err != nil {
			return fmt.Errorf("host_keys: %w", err)
		}
		for _, h := range hs {
			if byHost[h] == nil {
				order = append(order, h)
			}
			byHost[h] = append(byHost[h], k)
		}
	}
	for _, h := range order {
		if err := hk.Trust(h, byHost[h]...); err != nil {
			return fmt.Errorf("context %q: %w", e.Name, err)
		}
	}
	return nil
}

// Context is the export as a context of this computer.
func (e Export) Context() Context {
	return Context{Name: e.Name, Network: e.Network, Connections: e.Connections}
}

// ContextFromEnv returns the context PLOYZ_CONTEXT holds, its host keys
// trusted in hk, or ok=false when the variable is unset.
func ContextFromEnv(hk rpc.HostKeys) (c Context, ok bool, err error) {
	v := os.Getenv(EnvContext)
	if v == "" {
		return Context{}, false, nil
	}
	e, err := ParseExport([]byte(v))
	if err != nil {
		return Context{}, true, fmt.Errorf("%s: %w", EnvContext, err)
	}
	if err := e.Trust(hk); err != nil {
		return Context{}, true, fmt.Errorf("%s: %w", EnvContext, err)
	}
	return e.Context(), true, nil
}

// sshAddr is the host:port an ssh:// URL dials.
func sshAddr(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "ssh" || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = "22"
	}
	return net.JoinHostPort(u.Hostname(), port), true
}

// knownHostsHost is addr as known_hosts names it: "host" on port 22,
// "[host]:port" elsewhere.
func knownHostsHost(addr string) string { return knownhosts.Normalize(addr) }

// Resolve picks the context a command uses: the one named (--context),
// else the exported one in PLOYZ_CONTEXT, else the current one.
func Resolve(st *Store, name string) (Context, error) {
	if name != "" {
		return st.Context(name)
	}
	if c, ok, err := ContextFromEnv(rpc.HostKeys{Path: KnownHostsPath()}); ok {
		return c, err
	}
	return st.Current()
}

// Import saves an exported context in the store after pinning its host
// keys in hk, and makes it the current one when use is set. A context of
// the same name is refused unless replace is set; a pin hk holds for
// another key is refused (Trust), and nothing is saved then.
func (s *Store) Import(e Export, hk rpc.HostKeys, replace, use bool) error {
	if _, err := s.Context(e.Name); err == nil && !replace {
		return fmt.Errorf("context %q exists: --replace replaces it, --name imports under another name", e.Name)
	}
	if err := e.Trust(hk); err != nil {
		return err
	}
	if err := s.SaveContext(e.Context()); err != nil {
		return err
	}
	if use {
		return s.Use(e.Name)
	}
	return nil
}
