package daemon

import (
	"context"

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
