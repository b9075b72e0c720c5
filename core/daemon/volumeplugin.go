package daemon

import (
	"context"
	"time"

	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/core/daemon/feature/volumes"
	"github.com/ployz/ployz/sdk/volume"
)

// VolumePlugin is the volume plugin's name.
const VolumePlugin = volumes.VolumePlugin

// volumes is the volume feature; a Daemon made without Run (tests) gets
// one whose tasks run under the background context.
func (d *Daemon) volumes() *volumes.Feature {
	d.volsOnce.Do(func() { d.vols = volumes.New(context.Background(), featureHost{d}, d.log) })
	return d.vols
}

// volumePlugin hands volume-zfs its spec: the pool the Machine's
// ployz.zfs.pool label names (none without it), so an operator sets it
// with `ployz machine init|add|update --zfs-pool` as the Observe budget.
// It is not withdrawn on reset: the volumes stay on the Machine's disks.
func volumePlugin(v *volumes.Feature) servingfeature.Plugin {
	return servingfeature.Plugin{Name: VolumePlugin, What: "volume-zfs", Spec: v.Spec,
		Check: func(b []byte) error { _, err := volume.ParseSpec(b); return err }}
}

// wakeVolumePlugin starts the on-demand volume plugin once the Machine has
// a ZFS pool (ployz.zfs.pool), at once on a label change and again at each
// refresh (a start that failed is retried). Without a pool it stays
// stopped until a call needs it (docs/plugins.md, "On demand").
func (d *Daemon) wakeVolumePlugin(ctx context.Context) {
	for ctx.Err() == nil {
		// Taken before reading the record, so a change in between wakes us.
		changed := d.recordChange()
		if d.plugins != nil && d.record().Labels[volume.PoolLabel] != "" {
			if err := d.plugins.Wake(VolumePlugin); err != nil {
				d.log.Warn("volume plugin not started", "plugin", VolumePlugin, "error", err)
			}
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-time.After(servingfeature.RefreshEvery):
		}
	}
}
