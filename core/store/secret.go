package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// ClusterSecretFile is the file's name inside the store's state directory.
const ClusterSecretFile = "cluster-secret"

// ClusterSecretPath is where a Machine with data directory dataDir keeps it.
func ClusterSecretPath(dataDir string) string {
	return filepath.Join(dataDir, "store", ClusterSecretFile)
}

// LoadClusterSecret reads the secret of the Machine with data directory
// dataDir; other processes (certificate key encryption, spec hash salts)
// use this.
func LoadClusterSecret(dataDir string) (sdkstore.ClusterSecret, error) {
	return sdkstore.ReadClusterSecretFile(ClusterSecretPath(dataDir))
}

// WriteClusterSecretFile stores s at path (0600, directory 0700). Writing
// the same secret again is a no-op; replacing a different one is refused,
// since that would cut this Machine off from its Cluster.
func WriteClusterSecretFile(path string, s sdkstore.ClusterSecret) error {
	if s.IsZero() {
		return fmt.Errorf("refusing to write an empty Cluster secret")
	}
	old, err := sdkstore.ReadClusterSecretFile(path)
	switch {
	case err == nil && old == s:
		return nil
	case err == nil:
		return fmt.Errorf("%s already holds another Cluster's secret; `ployz machine rm`/reset this Machine first", path)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write Cluster secret: %w", err)
	}
	_, err = f.WriteString(s.Hex() + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write Cluster secret %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
