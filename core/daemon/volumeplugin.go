package daemon

import (
	"context"

	"github.com/ployz/ployz/core/daemon/feature/volumes"
	"github.com/ployz/ployz/core/machine"
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
func (d *Daemon) volumePlugin() servingPlugin {
	return servingPlugin{name: VolumePlugin, what: "volume-zfs", spec: d.volumes().Spec,
		check: func(b []byte) error { _, err := volume.ParseSpec(b); return err }}
}

func (d *Daemon) volumeLoop(ctx context.Context) { d.keepConfigured(ctx, d.volumePlugin()) }

// applyPool hands volume-zfs a pool label's change at once instead of at
// its next refresh; a failure is left to that refresh.
func (d *Daemon) applyPool(ctx context.Context) {
	if d.record().Phase != machine.Participating {
		return
	}
	if err := d.configure(ctx, d.volumePlugin()); err != nil {
		d.log.Warn("zfs pool not applied yet; the next refresh retries", "plugin", VolumePlugin, "error", err)
	}
}
