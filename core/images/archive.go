package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// TarDir archives a directory tree with names, modes, content and (when
// links is set) symlinks only, in name order, so one tree always gives the
// same bytes. It fails once the archive passes limit bytes (0: no limit).
// skip, when set, leaves out a slash-separated relative path (and, for a
// directory, everything below it).
func TarDir(root string, limit int, links bool, skip func(rel string, dir bool) bool) ([]byte, error) {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if skip != nil && skip(filepath.ToSlash(rel), d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir(), d.Type().IsRegular():
		case d.Type()&fs.ModeSymlink != 0 && links:
		default:
			return fmt.Errorf("%s: only regular files and directories can be sent", p)
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		st, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(st.Mode().Perm()), Format: tar.FormatPAX}
		switch {
		case st.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			err = tw.WriteHeader(h)
		case st.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err == nil {
				err = tw.WriteHeader(h)
			}
		default:
			var b []byte
			if b, err = os.ReadFile(p); err != nil {
				return nil, err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(b))
			if err = tw.WriteHeader(h); err == nil {
				_, err = tw.Write(b)
			}
		}
		if err != nil {
			return nil, err
		}
		if limit > 0 && buf.Len() > limit {
			return nil, fmt.Errorf("%s: larger than %d bytes", root, limit)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
