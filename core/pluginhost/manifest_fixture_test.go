package pluginhost

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestManifestFixtures pins manifest.json's form: a manifest written
// before on_demand existed (and one carrying a field this version does
// not know) still reads, every plugin started with the host; on_demand
// is written only when set, exactly as the fixture shows.
func TestManifestFixtures(t *testing.T) {
	old, err := LoadManifest(filepath.Join("testdata", "manifest", "before-on-demand.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range old.Plugins {
		if e.OnDemand {
			t.Fatalf("%s: on_demand read from a manifest without it", e.Name)
		}
	}
	path := filepath.Join("testdata", "manifest", "on-demand.json")
	m, err := LoadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := m.Get("volume-zfs"); !e.OnDemand {
		t.Fatalf("volume-zfs = %+v, want on_demand", e)
	}
	if e, _ := m.Get("dns"); e.OnDemand {
		t.Fatalf("dns = %+v, want started with the host", e)
	}
	out := filepath.Join(t.TempDir(), "manifest.json")
	if err := m.Write(out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	want, _ := os.ReadFile(path)
	if !bytes.Equal(got, want) {
		t.Fatalf("written manifest differs from the fixture:\n%s\nwant:\n%s", got, want)
	}
}

// TestInstallBundledMarksOnDemand: an entry written before on_demand
// existed becomes on demand for BundledOnDemand at the next install, even
// with the same digest; the others stay as they are.
func TestInstallBundledMarksOnDemand(t *testing.T) {
	dir, bin := t.TempDir(), t.TempDir()
	for _, n := range []string{"dns", "volume-zfs"} {
		if err := os.WriteFile(filepath.Join(bin, "ployz-"+n), []byte("#!/bin/sh\n# "+n+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := install(dir, filepath.Join(bin, "ployz-"+n), Entry{Name: n, Lifecycle: LifecycleLongLived, Bundled: true}); err != nil {
			t.Fatal(err)
		}
	}
	done, err := InstallBundled(dir, bin, []string{"dns", "volume-zfs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Name != "volume-zfs" || !done[0].OnDemand {
		t.Fatalf("InstallBundled wrote %+v, want volume-zfs alone, on demand", done)
	}
	m, err := LoadManifest(ManifestPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := m.Get("dns"); e.OnDemand {
		t.Fatalf("dns = %+v", e)
	}
	if again, err := InstallBundled(dir, bin, []string{"dns", "volume-zfs"}); err != nil || len(again) != 0 {
		t.Fatalf("second InstallBundled wrote %+v, %v; want nothing", again, err)
	}
}
