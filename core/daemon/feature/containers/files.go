package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/tarsafe"
)

// Files shipped with a deploy (compose configs, secrets, relative bind
// mounts) live in the Machine's state directory by digest and are bound
// read-only into the Containers that name them. They never enter the
// replicated store.

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

const maxFileContent = 1 << 20

func validateFiles(files []rpc.FileSpec, content map[string][]byte) error {
	for i, f := range files {
		field := fmt.Sprintf("spec.files[%d]", i)
		if !path.IsAbs(f.Target) || path.Clean(f.Target) == "/" {
			return rpc.InvalidField(field+".target", "%q is not an absolute path below /", f.Target)
		}
		if !digestRE.MatchString(f.Digest) {
			return rpc.InvalidField(field+".digest", "%q is not sha256:<64 hex>", f.Digest)
		}
		if f.Kind != "file" && f.Kind != "dir" {
			return rpc.InvalidField(field+".kind", "%q is not file or dir", f.Kind)
		}
		if f.Mode > 0o777 {
			return rpc.InvalidField(field+".mode", "%o is not a permission mode", f.Mode)
		}
	}
	for d, b := range content {
		if digestOf(b) != d {
			return rpc.InvalidField("files", "content of %s does not match its digest", short(d))
		}
		if len(b) > maxFileContent {
			return rpc.InvalidField("files", "%s is larger than %d bytes", short(d), maxFileContent)
		}
	}
	return nil
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// materialize writes each shipped file this Machine does not hold yet and
// returns the read-only bind mounts for them.
func materialize(dir string, files []rpc.FileSpec, content map[string][]byte) ([]mount.Mount, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if dir == "" {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "this Machine has no directory for shipped files")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("shipped files: %w", err)
	}
	var out []mount.Mount
	for i, f := range files {
		mode := shippedMode(f)
		p := shippedPath(dir, f)
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			b, ok := content[f.Digest]
			if !ok {
				return nil, rpc.InvalidField(fmt.Sprintf("spec.files[%d]", i), "content of %s (%s) was not sent and is not on this Machine", f.Source, short(f.Digest))
			}
			if err := writeShipped(p, f.Kind, mode, b); err != nil {
				return nil, fmt.Errorf("shipped file %s: %w", f.Source, err)
			}
		} else if err != nil {
			return nil, err
		}
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: p, Target: f.Target, ReadOnly: true})
	}
	return out, nil
}

// shippedPath is where materialize keeps f: one copy per digest and
// mode (the mode is the file's own).
func shippedPath(dir string, f rpc.FileSpec) string {
	return filepath.Join(dir, fmt.Sprintf("%s-%s-%o", f.Kind, strings.TrimPrefix(f.Digest, "sha256:"), shippedMode(f)))
}

// shippedMode is f's permission bits; none given is read-only for all.
func shippedMode(f rpc.FileSpec) os.FileMode {
	if f.Mode == 0 {
		return 0o444
	}
	return os.FileMode(f.Mode)
}

// archiveSuffix names the archive kept beside an unpacked directory: its
// bytes are the digest, which the unpacked tree (modes widened to be
// readable) no longer reproduces, and a move ships them again.
const archiveSuffix = ".tar"

// shippedName is the name materialize gives a shipped file, and its
// directory's kept archive.
var shippedName = regexp.MustCompile(`^(file|dir)-[0-9a-f]{64}-[0-7]+(\.tar)?$`)

// shippedContent reads back the content of files by digest, as
// create_container takes it, so a Volume Move can create the Container on
// another Machine. What this Machine no longer holds, or holds changed,
// is left out: the caller names it.
func (o *Ops) shippedContent(files []rpc.FileSpec) map[string][]byte {
	if o.filesDir == "" || len(files) == 0 {
		return nil
	}
	o.filesMu.Lock()
	defer o.filesMu.Unlock()
	out := map[string][]byte{}
	for _, f := range files {
		p := shippedPath(o.filesDir, f)
		if f.Kind == "dir" {
			p += archiveSuffix
		}
		b, err := os.ReadFile(p)
		if err != nil || digestOf(b) != f.Digest {
			o.log.Warn("shipped file not exported", "source", f.Source, "digest", short(f.Digest), "error", err)
			continue
		}
		out[f.Digest] = b
	}
	return out
}

// sweepFiles removes the shipped files no Container on this Machine
// mounts any more (running or not), after a Container is removed.
func (o *Ops) sweepFiles(ctx context.Context) error {
	if o.filesDir == "" {
		return nil
	}
	o.filesMu.Lock()
	defer o.filesMu.Unlock()
	entries, err := os.ReadDir(o.filesDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	list, err := o.docker.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	used := map[string]bool{}
	for _, c := range list {
		for _, m := range c.Mounts {
			if filepath.Dir(m.Source) == filepath.Clean(o.filesDir) {
				used[filepath.Base(m.Source)] = true
			}
		}
	}
	for _, e := range entries {
		if !shippedName.MatchString(e.Name()) || used[strings.TrimSuffix(e.Name(), archiveSuffix)] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(o.filesDir, e.Name())); err != nil {
			return err
		}
		o.log.Info("shipped file removed: no Container mounts it", "name", e.Name())
	}
	return nil
}

// writeShipped writes a file, or unpacks a directory archive, at p
// atomically (a temporary name renamed into place).
func writeShipped(p, kind string, mode os.FileMode, b []byte) error {
	tmp := p + ".tmp"
	os.RemoveAll(tmp) // a leftover of an interrupted write
	if kind == "file" {
		if err := os.WriteFile(tmp, b, mode); err != nil {
			return err
		}
		if err := os.Chmod(tmp, mode); err != nil { // past the umask
			return err
		}
		return os.Rename(tmp, p)
	}
	if err := untar(tmp, b); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	// The archive first: an unpacked tree without it exports nothing.
	if err := os.WriteFile(p+archiveSuffix, b, 0o400); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, p)
}

// untar unpacks a shipped directory: regular files and directories only,
// every name inside root.
func untar(root string, b []byte) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tarsafe.Next(tr)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("archive entry %q leaves the directory", h.Name)
		}
		dst := filepath.Join(root, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(io.LimitReader(tr, maxFileContent))
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, os.FileMode(h.Mode).Perm()|0o444); err != nil {
				return err
			}
		default:
			return fmt.Errorf("archive entry %q: only files and directories are shipped", h.Name)
		}
	}
}
