// Package pluginhost runs Ployz plugins for ployzd: it reads the plugin
// manifest, verifies each binary against its sha256, starts managed plugins
// as go-plugin children (restarting them when they die), attaches to
// long-lived plugins through their reattach record without ever stopping
// them, negotiates the plugin-API version, and keeps a catalog of the
// capabilities healthy plugins serve. A call for a capability no healthy
// plugin serves is refused with details.capability naming it. An
// on-demand plugin (Entry.OnDemand) is not started with the host: its
// capabilities, read from the binary's `info`, are advertised, and the
// first call for one (or Host.Wake) starts it, within StartTimeout.
//
// ployzd wires it like this:
//
//	h, err := pluginhost.New(pluginhost.Config{
//		Dir:      pluginhost.DefaultDir,
//		Logger:   logger,
//		OnChange: func(caps []string) { /* update the Machine record */ },
//	})
//	err = h.Start(ctx)               // returns after every plugin's first attempt
//	defer h.Close()                  // stops managed plugins, detaches long-lived ones
//	rpc.Options{ExtraCapabilities: h.Capabilities}
//	rpc.Route{Capability: c, Available: func() bool { return h.Available(c) },
//		Handler: ... h.Call(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) error { ... }) }
package pluginhost

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/sdk"
)

// Lifecycle says who owns a plugin's process.
type Lifecycle string

const (
	// LifecycleManaged plugins are go-plugin children of the host: started,
	// restarted on death, and stopped with it.
	LifecycleManaged Lifecycle = "managed"
	// LifecycleLongLived plugins run under their own systemd unit on a unix
	// socket; the host only attaches to them and never stops them.
	LifecycleLongLived Lifecycle = "long-lived"
)

// DefaultDir is where ployzd keeps installed plugins.
const DefaultDir = "/var/lib/ployz/plugins"

// Entry is one installed plugin in the manifest.
type Entry struct {
	// Name is the plugin name; the binary's Info must report the same.
	Name string `json:"name"`
	// SHA256 is the hex digest of the binary, stored at BlobPath(dir, SHA256).
	SHA256 string `json:"sha256"`
	// Lifecycle is managed or long-lived.
	Lifecycle Lifecycle `json:"lifecycle"`
	// Socket overrides a long-lived plugin's socket path.
	Socket string `json:"socket,omitempty"`
	// Config is handed to the plugin's Configure as is (unless ployzd
	// supplies the configuration itself, see Host.SetConfig).
	Config json.RawMessage `json:"config,omitempty"`
	// Bundled marks a plugin ployzd installed from the binaries shipped
	// beside it (InstallBundled); an operator's own install clears it, and
	// ployzd then leaves the entry alone.
	Bundled bool `json:"bundled,omitempty"`
	// OnDemand makes the host leave the plugin stopped until it is needed:
	// its capabilities (read from the binary's `info`) stay advertised,
	// and the first call for one, or Host.Wake, starts it. Absent (older
	// manifests) means started with the host.
	OnDemand bool `json:"on_demand,omitempty"`
}

// equal reports whether two entries describe the same installation.
func (e Entry) equal(o Entry) bool {
	return e.Name == o.Name && e.SHA256 == o.SHA256 && e.Lifecycle == o.Lifecycle &&
		e.Socket == o.Socket && e.Bundled == o.Bundled && e.OnDemand == o.OnDemand && bytes.Equal(e.Config, o.Config)
}

// Manifest lists the installed plugins. It lives at <dir>/manifest.json.
type Manifest struct {
	// Plugins are the installed plugins, in the order the host starts them.
	Plugins []Entry `json:"plugins"`
}

// ManifestPath returns the manifest path inside a plugin directory.
func ManifestPath(dir string) string { return filepath.Join(dir, "manifest.json") }

// BlobPath returns where the binary with the given digest is stored.
func BlobPath(dir, digest string) string {
	return filepath.Join(dir, "blobs", "sha256", digest)
}

// LinkPath returns the stable path of a plugin's current binary, a symlink
// to its blob; the systemd unit ployz-plugin@.service executes it.
func LinkPath(dir, name string) string { return filepath.Join(dir, "bin", name) }

// LoadManifest reads a manifest. A missing file is an empty manifest: a
// Machine with no plugins installed is valid.
func LoadManifest(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Manifest{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read plugin manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode plugin manifest %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("plugin manifest %s: %w", path, err)
	}
	return &m, nil
}

// Validate checks names, digests and lifecycles, and that names are
// unique. An error names the offending field, e.g. plugins[2].sha256.
func (m *Manifest) Validate() error {
	seen := map[string]bool{}
	for i, e := range m.Plugins {
		field := func(f string) string { return fmt.Sprintf("field \"plugins[%d].%s\"", i, f) }
		if err := sdk.ValidName(e.Name); err != nil {
			return fmt.Errorf("%s: %w", field("name"), err)
		}
		if seen[e.Name] {
			return fmt.Errorf("%s: plugin %q is listed twice", field("name"), e.Name)
		}
		seen[e.Name] = true
		if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != 32 {
			return fmt.Errorf("%s: plugin %q: %q is not 64 hex digits", field("sha256"), e.Name, e.SHA256)
		}
		if e.Lifecycle != LifecycleManaged && e.Lifecycle != LifecycleLongLived {
			return fmt.Errorf("%s: plugin %q: %q is neither %q nor %q", field("lifecycle"), e.Name, e.Lifecycle, LifecycleManaged, LifecycleLongLived)
		}
	}
	return nil
}

// Write stores the manifest atomically.
func (m *Manifest) Write(path string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plugin manifest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create plugin directory: %w", err)
	}
	return writeAtomic(path, append(b, '\n'), 0o644)
}

// Get returns the entry named name.
func (m *Manifest) Get(name string) (Entry, bool) {
	for _, e := range m.Plugins {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Set adds e, replacing an entry with the same name.
func (m *Manifest) Set(e Entry) {
	for i := range m.Plugins {
		if m.Plugins[i].Name == e.Name {
			m.Plugins[i] = e
			return
		}
	}
	m.Plugins = append(m.Plugins, e)
}

// writeAtomic writes b to path durably: a power loss leaves the old or the
// new manifest, never an empty one (file and directory are fsynced).
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	if err := machine.WriteFileAtomic(path, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
