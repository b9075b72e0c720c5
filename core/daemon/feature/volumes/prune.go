package volumes

import (
	"context"

	"github.com/hashicorp/go-hclog"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// A copy keeps its own newest run snapshots only (volume.KeepRunSnapshots)
// and never prunes by another Machine's copy: each Machine decides from
// its own snapshots, after a run snapshot is taken here (the Writer, or a
// Move's cut) and after a stream lands here (a Mirror). A pruned snapshot
// leaves a bookmark, so the Writer can still send an incremental stream
// to a Mirror that missed runs. An operator's own snapshots are kept.

// canPrune reports whether this Machine's volume plugin prunes; an older
// plugin does not, and its copies keep every run snapshot.
func (f *Feature) canPrune() bool { return f.available(volume.CapPrune) }

// pruneRuns destroys vi's run snapshots older than the newest kept,
// bookmarking each first, and answers the volume after. A failure is
// logged and leaves the volume as it was: the run that called it
// succeeded, and the next one prunes again.
func pruneRuns(ctx context.Context, log hclog.Logger, c volumev1.VolumeClient, vi *volumev1.VolumeInfo) *volumev1.VolumeInfo {
	var names []string
	for _, s := range vi.GetSnapshotDetails() {
		names = append(names, s.GetName())
	}
	for _, snap := range volume.PruneRunSnapshots(names, volume.KeepRunSnapshots) {
		resp, err := c.DestroySnapshot(ctx, &volumev1.DestroySnapshotRequest{Volume: vi.GetName(), Snapshot: snap, Bookmark: true})
		if err != nil {
			log.Warn("run snapshot not pruned; the next run tries again", "volume", vi.GetName(), "snapshot", snap, "error", err)
			return vi
		}
		log.Info("pruned run snapshot, kept as a bookmark", "volume", vi.GetName(), "snapshot", snap)
		vi = resp.GetVolume()
	}
	return vi
}
