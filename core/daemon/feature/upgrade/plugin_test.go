package upgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/pluginhost"
)

// pluginRelease writes releases/<v>/bin/ployz-dns with content v.
func pluginRelease(t *testing.T, root, v string) string {
	t.Helper()
	p := filepath.Join(root, v, "bin", "ployz-dns")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n# dns "+v+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func installedDigest(t *testing.T, dir string) string {
	t.Helper()
	m, err := pluginhost.LoadManifest(pluginhost.ManifestPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := m.Get("dns")
	return e.SHA256
}

// TestSwitchPluginAndBack: a one-plugin upgrade installs release To's
// binary by digest and links the override (so a daemon restart keeps it);
// the way back restores what ran before: the release's binary without an
// override, or an earlier override. An operator's own install is refused.
func TestSwitchPluginAndBack(t *testing.T) {
	data := t.TempDir()
	root := filepath.Join(data, "releases")
	v1, v2, v3 := pluginRelease(t, root, "1.0"), pluginRelease(t, root, "2.0"), pluginRelease(t, root, "3.0")
	pdir := filepath.Join(data, "plugins")
	if _, err := pluginhost.InstallBundled(pdir, filepath.Dir(v1), []string{"dns"}); err != nil {
		t.Fatal(err)
	}
	d1, _ := pluginhost.FileDigest(v1)
	d2, _ := pluginhost.FileDigest(v2)
	d3, _ := pluginhost.FileDigest(v3)

	a := &applier{cfg: ApplyConfig{From: "1.0", To: "2.0", DataDir: data, Plugin: "dns"}, root: root}
	if err := a.preparePlugin(); err != nil {
		t.Fatal(err)
	}
	if err := a.switchPlugin(t.Context(), "2.0"); err != nil {
		t.Fatal(err)
	}
	if got := installedDigest(t, pdir); got != d2 {
		t.Fatalf("installed %s, want release 2.0's %s", got, d2)
	}
	if src := BundledSources(data, filepath.Dir(v1))["dns"]; src != overridePath(data, "dns") {
		t.Fatalf("a daemon restart would install %s, not the override", src)
	}
	if w := a.pluginBinaries("2.0"); len(w) != 1 || w["dns"] != v2 {
		t.Fatalf("wanted binaries %v", w)
	}
	if err := a.switchPlugin(t.Context(), "1.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(overridePath(data, "dns")); !os.IsNotExist(err) || installedDigest(t, pdir) != d1 {
		t.Fatalf("way back: override %v, installed %s want %s", err, installedDigest(t, pdir), d1)
	}

	// From an earlier one-plugin upgrade (override on 2.0) to 3.0 and back.
	if err := a.switchPlugin(t.Context(), "2.0"); err != nil {
		t.Fatal(err)
	}
	b := &applier{cfg: ApplyConfig{From: "1.0", To: "3.0", DataDir: data, Plugin: "dns"}, root: root}
	if err := b.preparePlugin(); err != nil || b.plugin.prevOverride != v2 {
		t.Fatalf("prepare: %v, previous override %q", err, b.plugin.prevOverride)
	}
	if err := b.switchPlugin(t.Context(), "3.0"); err != nil || installedDigest(t, pdir) != d3 {
		t.Fatalf("to 3.0: %v", err)
	}
	if err := b.switchPlugin(t.Context(), "1.0"); err != nil || installedDigest(t, pdir) != d2 {
		t.Fatalf("back from 3.0 must restore the override on 2.0: %v, installed %s", err, installedDigest(t, pdir))
	}

	// A whole-Machine upgrade drops the override and brings it back on its way back.
	c := &applier{cfg: ApplyConfig{From: "1.0", To: "3.0", DataDir: data}, root: root, overrides: readOverrides(data)}
	if err := c.switchOverrides("3.0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(overridePath(data, "dns")); !os.IsNotExist(err) {
		t.Fatalf("override kept by a whole-Machine upgrade: %v", err)
	}
	if w := c.pluginBinaries("1.0"); w["dns"] != v2 {
		t.Fatalf("way back wants %v, the override on 2.0", w)
	}
	if err := c.switchOverrides("1.0"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(overridePath(data, "dns")); got != v2 {
		t.Fatalf("override after the way back: %q", got)
	}

	// An operator's own install of the plugin is not the release's to change.
	if _, err := pluginhost.Install(pdir, v1, "dns", pluginhost.LifecycleLongLived, nil); err != nil {
		t.Fatal(err)
	}
	if err := (&applier{cfg: ApplyConfig{From: "1.0", To: "2.0", DataDir: data, Plugin: "dns"}, root: root}).preparePlugin(); err == nil || !strings.Contains(err.Error(), "installed by an operator") {
		t.Fatalf("operator install: %v", err)
	}
}
