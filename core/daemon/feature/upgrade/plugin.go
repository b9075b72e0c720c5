package upgrade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ployz/ployz/core/pluginhost"
)

// A plugin upgraded on its own (`ployz plugin upgrade`) runs a binary of
// another release than the Machine's. Its override, a link
// releases/plugins/ployz-<name> to that release's binary, keeps it so
// across daemon restarts (installBundled prefers it); a whole-Machine
// upgrade removes the overrides, since its release ships every plugin.

// overrideDir holds the plugin overrides.
func overrideDir(dataDir string) string { return filepath.Join(dataDir, "releases", "plugins") }

func overridePath(dataDir, name string) string {
	return filepath.Join(overrideDir(dataDir), "ployz-"+name)
}

// BundledSources maps each bundled plugin to the binary installBundled
// takes: its override, else the one beside ployzd in binDir.
func BundledSources(dataDir, binDir string) map[string]string {
	out := make(map[string]string, len(pluginhost.Bundled))
	for _, n := range pluginhost.Bundled {
		out[n] = filepath.Join(binDir, "ployz-"+n)
		if _, err := os.Stat(overridePath(dataDir, n)); err == nil {
			out[n] = overridePath(dataDir, n)
		}
	}
	return out
}

// pluginSwap is the state of a one-plugin upgrade: which binary each
// release means for the plugin, so the way back restores what ran.
type pluginSwap struct {
	name string
	// prevOverride is the override's target before the upgrade ("" when
	// the plugin came from the Machine's release).
	prevOverride string
}

// preparePlugin checks that the plugin is one ployzd installs itself (an
// operator's own install is theirs to change) and that release To ships
// it, and remembers the current override, before anything changes.
func (a *applier) preparePlugin() error {
	name := a.cfg.Plugin
	m, err := pluginhost.LoadManifest(pluginhost.ManifestPath(a.pluginDir()))
	if err != nil {
		return err
	}
	e, ok := m.Get(name)
	if !ok {
		return fmt.Errorf("plugin %s is not installed on this Machine", name)
	}
	if !e.Bundled {
		return fmt.Errorf("plugin %s was installed by an operator (ployzd plugins install), not from a release; upgrade it the same way", name)
	}
	if _, err := os.Stat(filepath.Join(a.root, a.cfg.To, "bin", "ployz-"+name)); err != nil {
		return fmt.Errorf("release %s does not ship plugin %s", a.cfg.To, name)
	}
	a.plugin = &pluginSwap{name: name}
	if t, err := os.Readlink(overridePath(a.cfg.DataDir, name)); err == nil {
		a.plugin.prevOverride = t
	}
	return nil
}

func (a *applier) pluginDir() string { return filepath.Join(a.cfg.DataDir, "plugins") }

// pluginBinary is the plugin's binary on release v: To's, or on the way
// back whatever ran before (the override, else the running release's).
func (a *applier) pluginBinary(v string) string {
	if v == a.cfg.To || a.plugin.prevOverride == "" {
		return filepath.Join(a.root, v, "bin", "ployz-"+a.plugin.name)
	}
	return a.plugin.prevOverride
}

// switchPlugin points the plugin's override at its binary on release v and
// installs that binary by digest; the plugin host then hands the running
// process over to it (or restarts its unit), as for any installed plugin.
func (a *applier) switchPlugin(_ context.Context, v string) error {
	name, bin := a.plugin.name, a.pluginBinary(v)
	link := overridePath(a.cfg.DataDir, name)
	if v != a.cfg.To && a.plugin.prevOverride == "" {
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := symlinkAtomic(bin, link); err != nil {
			return err
		}
	}
	if _, err := pluginhost.InstallBundledFrom(a.pluginDir(), []string{name}, map[string]string{name: bin}); err != nil {
		return fmt.Errorf("install plugin %s from %s: %w", name, bin, err)
	}
	return nil
}

// pluginBinaries maps each plugin release v brings to its binary: only
// the one plugin of a one-plugin upgrade; on a whole-Machine upgrade's way
// back, an override it removed wins over the release's binary.
func (a *applier) pluginBinaries(v string) map[string]string {
	if a.plugin != nil {
		return map[string]string{a.plugin.name: a.pluginBinary(v)}
	}
	out := map[string]string{}
	bins, _ := filepath.Glob(filepath.Join(a.root, v, "bin", "ployz-*"))
	for _, b := range bins {
		name := strings.TrimPrefix(filepath.Base(b), "ployz-")
		out[name] = b
		if t, ok := a.overrides[name]; ok && v != a.cfg.To {
			out[name] = t
		}
	}
	return out
}

// readOverrides lists the plugin overrides by plugin name.
func readOverrides(dataDir string) map[string]string {
	out := map[string]string{}
	links, _ := filepath.Glob(filepath.Join(overrideDir(dataDir), "ployz-*"))
	for _, l := range links {
		if t, err := os.Readlink(l); err == nil {
			out[strings.TrimPrefix(filepath.Base(l), "ployz-")] = t
		}
	}
	return out
}

// switchOverrides removes the plugin overrides when the Machine moves onto
// release To (it ships every plugin) and puts them back on the way back.
func (a *applier) switchOverrides(v string) error {
	for name, t := range a.overrides {
		link := overridePath(a.cfg.DataDir, name)
		if v == a.cfg.To {
			if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := symlinkAtomic(t, link); err != nil {
			return err
		}
	}
	return nil
}
