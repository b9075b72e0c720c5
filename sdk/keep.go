package sdk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/fsutil"
)

// KeepConfig stores the configuration a long-lived plugin was given at
// path, atomically and durably, unless path already holds exactly b. A
// long-lived plugin reads it back when it starts, so a restart (a crash,
// `systemctl restart`, an upgrade) serves the last configuration at once,
// without waiting for ployzd to attach and Configure it again
// (docs/plugins.md, "What a plugin gets from the daemon"). It reports
// whether the file changed.
func KeepConfig(path string, b []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return false, nil
	}
	if err := fsutil.WriteFileAtomic(path, b, 0o644); err != nil {
		return false, fmt.Errorf("keep config: %w", err)
	}
	return true, nil
}

// WaitForFile waits until path exists: a long-lived plugin started before
// it was ever configured waits for its first KeepConfig. It returns false
// when ctx ends or served (the plugin socket's ServeLongLived) returns
// first, which leaves the plugin unreachable.
func WaitForFile(ctx context.Context, path string, served <-chan error, log hclog.Logger) bool {
	logged := false
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if !logged {
			log.Info("not configured yet; waiting for ployzd to Configure this plugin", "config", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case err := <-served:
			log.Error("plugin socket not served", "error", err)
			return false
		case <-time.After(200 * time.Millisecond):
		}
	}
}
