package containers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
)

func TestCreateMountsShippedFiles(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	conf, secret := []byte("server {}"), []byte("hunter2")
	spec := to.Spec("proxy", nil)
	spec.Files = []rpc.FileSpec{
		{Target: "/etc/nginx/default.conf", Digest: digestOf(conf), Kind: "file", Source: "config:c"},
		{Target: "/run/secrets/pw", Digest: digestOf(secret), Kind: "file", Mode: 0o400, Source: "secret:pw"},
	}
	req := rpc.CreateContainerRequest{Name: to.Name("proxy"), Spec: spec,
		Files: map[string][]byte{digestOf(conf): conf, digestOf(secret): secret}}
	ob := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), req)
	in, err := to.Cli.ContainerInspect(context.Background(), ob.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range in.Mounts {
		if m.RW {
			t.Errorf("%s is mounted writable", m.Destination)
		}
		b, err := os.ReadFile(m.Source)
		if err != nil {
			t.Fatal(err)
		}
		got[m.Destination] = string(b)
		st, _ := os.Stat(m.Source)
		if m.Destination == "/run/secrets/pw" && st.Mode().Perm() != 0o400 {
			t.Errorf("secret mode %o, want 400", st.Mode().Perm())
		}
	}
	if got["/etc/nginx/default.conf"] != "server {}" || got["/run/secrets/pw"] != "hunter2" {
		t.Fatalf("mounts: %v", got)
	}
	if strings.Contains(in.Config.Labels[rpc.LabelSpec], "hunter2") {
		t.Fatal("secret content in the spec label")
	}
	// A second Container of the same spec needs no content: the Machine
	// keeps it by digest.
	req.Name, req.Files = to.Name("proxy2"), nil
	featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), req)
	// Content that does not match its digest is refused, naming the field.
	bad := rpc.CreateContainerRequest{Name: to.Name("bad"), Spec: to.Spec("bad", nil), Files: map[string][]byte{digestOf(conf): []byte("other")}}
	if _, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), bad); featuretest.Detail(err, "field") != "files" {
		t.Fatalf("mismatched content: %v", err)
	}
	missing := rpc.CreateContainerRequest{Name: to.Name("miss"), Spec: to.Spec("miss", nil)}
	missing.Spec.Files = []rpc.FileSpec{{Target: "/x", Digest: digestOf([]byte("never sent")), Kind: "file"}}
	if _, err := featuretest.Decode[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), missing); featuretest.Detail(err, "field") != "spec.files[0]" {
		t.Fatalf("missing content: %v", err)
	}
}

// TestRemovedContainerFreesShippedFiles: removing a Container removes the
// shipped files no other Container (running or not) mounts, and keeps
// those another still mounts.
func TestRemovedContainerFreesShippedFiles(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	shared, own := []byte("shared config"), []byte("only the first")
	create := func(name string, files ...[]byte) rpc.ContainerObservation {
		spec := to.Spec(name, nil)
		content := map[string][]byte{}
		for i, b := range files {
			spec.Files = append(spec.Files, rpc.FileSpec{Target: fmt.Sprintf("/f%d", i), Digest: digestOf(b), Kind: "file", Source: "config:c"})
			content[digestOf(b)] = b
		}
		return featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name(name), Spec: spec, Files: content})
	}
	held := func() int {
		entries, err := os.ReadDir(to.filesDir)
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	a := create("a", shared, own)
	b := create("b", shared)
	if n := held(); n != 2 {
		t.Fatalf("%d shipped files, want 2", n)
	}
	featuretest.Must[map[string]string](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: a.ID, Force: true})
	if n := held(); n != 1 {
		t.Fatalf("after removing a: %d shipped files, want the shared one", n)
	}
	if _, err := os.Stat(filepath.Join(to.filesDir, fmt.Sprintf("file-%s-444", strings.TrimPrefix(digestOf(shared), "sha256:")))); err != nil {
		t.Fatalf("the shared file b mounts is gone: %v", err)
	}
	featuretest.Must[map[string]string](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: b.ID, Force: true})
	if n := held(); n != 0 {
		t.Fatalf("after removing b: %d shipped files, want none", n)
	}
}

// TestExportShipsFilesBack: export_container with with_files answers the
// content of every shipped file and directory by digest, as
// create_container took it (a Volume Move creates the Container on
// another Machine with it); without with_files it carries none; removing
// the Container removes a directory's kept archive too.
func TestExportShipsFilesBack(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	src := t.TempDir()
	if err := os.Mkdir(filepath.Join(src, "conf.d"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "conf.d", "a.conf"), []byte("a = 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := images.TarDir(src, 1<<20, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("hunter2")
	spec := to.Spec("exp", nil)
	spec.Files = []rpc.FileSpec{
		{Target: "/etc/app", Digest: digestOf(dir), Kind: "dir", Source: "./conf"},
		{Target: "/run/secrets/pw", Digest: digestOf(secret), Kind: "file", Mode: 0o400, Source: "secret:pw"},
	}
	content := map[string][]byte{digestOf(dir): dir, digestOf(secret): secret}
	ob := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name("exp"), Spec: spec, Files: content})
	plain := featuretest.Must[rpc.ContainerExport](t, featuretest.Typed(to.exportContainer), rpc.ExportContainerRequest{ID: ob.ID})
	if plain.Files != nil {
		t.Fatalf("export without with_files carries %d files", len(plain.Files))
	}
	ex := featuretest.Must[rpc.ContainerExport](t, featuretest.Typed(to.exportContainer), rpc.ExportContainerRequest{ID: ob.ID, WithFiles: true})
	if len(ex.Files) != 2 || string(ex.Files[digestOf(secret)]) != "hunter2" || !bytes.Equal(ex.Files[digestOf(dir)], dir) {
		t.Fatalf("exported files: %d, want the secret and the directory's archive", len(ex.Files))
	}
	featuretest.Must[map[string]string](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: ob.ID, Force: true})
	if entries, _ := os.ReadDir(to.filesDir); len(entries) != 0 {
		t.Fatalf("after the remove %d entries are left in the files directory", len(entries))
	}
}
