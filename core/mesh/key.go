package mesh

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/machine"
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
	// Private key material: its directory is not listable by others.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return wgtypes.Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	if err := machine.WriteFileAtomic(path, []byte(k.String()+"\n"), 0o600); err != nil {
		return wgtypes.Key{}, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}
