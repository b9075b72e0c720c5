package daemon

import (
	"context"

	"github.com/ployz/ployz/core/daemon/feature/upgrade"
	"github.com/ployz/ployz/core/rpc"
)

// The upgrade feature lives in feature/upgrade; these are the entry
// points `ployzd upgrade apply|stage` (cmd/ployzd) calls.

// ApplyConfig is one swap onto a staged release (upgrade.ApplyConfig).
type ApplyConfig = upgrade.ApplyConfig

// ApplyUpgrade swaps this Machine onto release cfg.To (upgrade.Apply).
func ApplyUpgrade(ctx context.Context, cfg ApplyConfig) error { return upgrade.Apply(ctx, cfg) }

// StageBundleFile verifies and unpacks a bundle already on this Machine
// (upgrade.StageBundleFile).
func StageBundleFile(dataDir, path string, req rpc.UpgradeRequest) (string, error) {
	return upgrade.StageBundleFile(dataDir, path, req)
}
