package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// LoadOrCreateKey reads the base64 WireGuard private key stored at path, or
// generates one and writes it there (mode 0600, parent directory 0700) when
// the file does not exist. A key file readable by others is tightened to 0600.
func LoadOrCreateKey(path string) (wgtypes.Key, error) {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		k, err := wgtypes.ParseKey(strings.TrimSpace(string(b)))
		if err != nil {
			return wgtypes.Key{}, fmt.Errorf("key file %s: %w", path, err)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(path, 0o600); err != nil {
				return wgtypes.Key{}, fmt.Errorf("key file %s: tighten mode: %w", path, err)
			}
		}
		return k, nil
	case !errors.Is(err, fs.ErrNotExist):
		return wgtypes.Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	k, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		return wgtypes.Key{}, fmt.Errorf("generate key for %s: %w", path, err)
	}
	if err := writeFileAtomic(path, []byte(k.String()+"\n"), 0o600); err != nil {
		return wgtypes.Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// writeFileAtomic writes via a temp file and rename so a crash never leaves a
// half-written key or endpoint file behind.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
