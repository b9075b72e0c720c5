package pluginhost

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/ployz/ployz/internal/fsutil"
)

// Install copies the binary at src into dir under its sha256, points
// LinkPath(dir, name) at it and records the entry in the manifest,
// replacing any entry with the same name. The returned entry carries the
// digest. A running long-lived plugin keeps its old binary until its unit
// restarts.
func Install(dir, src, name string, lifecycle Lifecycle, config json.RawMessage) (Entry, error) {
	return install(dir, src, Entry{Name: name, Lifecycle: lifecycle, Config: config})
}

// InstallEntry is Install for a whole entry (OnDemand too); its SHA256 is
// replaced by src's digest.
func InstallEntry(dir, src string, e Entry) (Entry, error) { return install(dir, src, e) }

// install stores src and records e with src's digest.
func install(dir, src string, e Entry) (Entry, error) {
	name := e.Name
	digest, err := FileDigest(src)
	if err != nil {
		return Entry{}, err
	}
	e.SHA256 = digest
	m, err := LoadManifest(ManifestPath(dir))
	if err != nil {
		return Entry{}, err
	}
	m.Set(e)
	if err := m.Validate(); err != nil {
		return Entry{}, err
	}
	blob := BlobPath(dir, digest)
	if err := copyBlob(src, blob); err != nil {
		return Entry{}, fmt.Errorf("install plugin %q: %w", name, err)
	}
	if err := VerifyInstalled(dir, name, digest); err != nil {
		return Entry{}, err
	}
	if err := relink(LinkPath(dir, name), blob); err != nil {
		return Entry{}, fmt.Errorf("install plugin %q: %w", name, err)
	}
	if err := m.Write(ManifestPath(dir)); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Bundled names the plugins shipped with ployzd, as binaries ployz-<name>
// beside it; each runs long-lived under ployz-plugin@<name>.service.
var Bundled = []string{"dns", "ingress-caddy", "logstore", "metrics", "volume-zfs"}

// BundledOnDemand are the bundled plugins installed on demand
// (Entry.OnDemand): the volume plugin has nothing to do on a Machine
// without a ZFS pool, so it runs only once one is set or a call needs it.
var BundledOnDemand = []string{"volume-zfs"}

// InstallBundled installs each shipped binary binDir/ployz-<name> into dir
// by digest as a long-lived plugin, unless the manifest already holds that
// digest or an operator installed the plugin themselves (their entry is not
// Bundled). A missing binary is skipped. It returns the entries it wrote; a
// running plugin switches to its new binary through the host
// (Host.watchManifest), after verification.
func InstallBundled(dir, binDir string, names []string) ([]Entry, error) {
	srcs := make(map[string]string, len(names))
	for _, name := range names {
		srcs[name] = filepath.Join(binDir, "ployz-"+name)
	}
	return InstallBundledFrom(dir, names, srcs)
}

// InstallBundledFrom is InstallBundled with each plugin's binary at
// srcs[name] (a plugin upgraded on its own comes from another release).
func InstallBundledFrom(dir string, names []string, srcs map[string]string) ([]Entry, error) {
	m, err := LoadManifest(ManifestPath(dir))
	if err != nil {
		return nil, err
	}
	var done []Entry
	for _, name := range names {
		src := srcs[name]
		if _, err := os.Stat(src); err != nil {
			continue
		}
		digest, err := FileDigest(src)
		if err != nil {
			return done, err
		}
		onDemand := slices.Contains(BundledOnDemand, name)
		if old, ok := m.Get(name); ok && (!old.Bundled || old.SHA256 == digest && old.OnDemand == onDemand) {
			continue
		}
		e, err := install(dir, src, Entry{Name: name, Lifecycle: LifecycleLongLived, Bundled: true, OnDemand: onDemand})
		if err != nil {
			return done, err
		}
		done = append(done, e)
	}
	return done, nil
}

// copyBlob writes src to dst via a temporary file, so a reader never sees a
// partial blob under a digest name.
func copyBlob(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("create blob directory: %w", err)
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".blob-*")
	if err != nil {
		return fmt.Errorf("create temporary blob: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod blob: %w", err)
	}
	// The manifest will name this digest: the blob must be on disk first.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync blob: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close blob: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("store blob: %w", err)
	}
	return fsutil.SyncDir(filepath.Dir(dst))
}

// relink atomically points link at target (symlink beside it, then rename).
func relink(link, target string) error {
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("create bin directory: %w", err)
	}
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		rel = target
	}
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("symlink %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("switch %s: %w", link, err)
	}
	return fsutil.SyncDir(filepath.Dir(link))
}
