package sdk

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-plugin"
)

// DefaultSocketDir is where long-lived plugins listen by convention.
const DefaultSocketDir = "/run/ployz/plugins"

// DefaultSocket returns the conventional socket path of a long-lived plugin.
func DefaultSocket(name string) string {
	return filepath.Join(DefaultSocketDir, name+".sock")
}

// Reattach is what a long-lived plugin writes next to its socket (and prints
// on stdout) so a host can attach to it with go-plugin's ReattachConfig.
type Reattach struct {
	// Name is the plugin name.
	Name string `json:"name"`
	// Protocol is the go-plugin protocol, always "grpc".
	Protocol string `json:"protocol"`
	// ProtocolVersion is the handshake version, HandshakeVersion.
	ProtocolVersion int `json:"protocol_version"`
	// Network is the listener network, "unix".
	Network string `json:"network"`
	// Addr is the socket path.
	Addr string `json:"addr"`
	// Pid is the serving process.
	Pid int `json:"pid"`
}

// ReattachPath returns the reattach record path for a socket path:
// /run/ployz/plugins/dns.sock → /run/ployz/plugins/dns.reattach.json.
func ReattachPath(socket string) string {
	return strings.TrimSuffix(socket, ".sock") + ".reattach.json"
}

// Config converts the record to a go-plugin ReattachConfig. It sets Test,
// which in go-plugin means "this process owns its own lifetime": the host's
// Client.Kill then never signals it, which is what a long-lived plugin needs.
func (r Reattach) Config() *plugin.ReattachConfig {
	return &plugin.ReattachConfig{
		Protocol:        plugin.Protocol(r.Protocol),
		ProtocolVersion: r.ProtocolVersion,
		Addr:            &net.UnixAddr{Net: r.Network, Name: r.Addr},
		Pid:             r.Pid,
		Test:            true,
	}
}

// WriteReattach writes r to path atomically and durably (write, fsync,
// rename, fsync the directory), so a host never reads half a record.
func WriteReattach(path string, r Reattach) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode reattach record: %w", err)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write reattach record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("install reattach record: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("install reattach record: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("install reattach record: %w", err)
	}
	return nil
}

func writeSynced(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadReattach reads a record written by WriteReattach.
func ReadReattach(path string) (Reattach, error) {
	var r Reattach
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read reattach record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decode reattach record %s: %w", path, err)
	}
	if r.Protocol != string(plugin.ProtocolGRPC) || r.Network != "unix" || r.Addr == "" || r.Pid <= 0 {
		return r, fmt.Errorf("reattach record %s is incomplete: %+v", path, r)
	}
	return r, nil
}
