package volumerun

import (
	"context"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumes"
)

// The plain volume commands on one Machine a run is built from.

// List asks the Machines t names for their volumes, sorted by name.
func (rn *Runner) List(ctx context.Context, t rpc.Target) ([]volumes.MachineVolumes, error) {
	return volumes.List(ctx, rn.Entry, t)
}

// Create creates volume name with a quota of size bytes on machine;
// volume names are unique in the Cluster, so a name another Machine
// holds is refused.
func (rn *Runner) Create(ctx context.Context, machine, name string, size uint64) (rpc.Volume, error) {
	var v rpc.Volume
	ms, err := rn.List(ctx, rpc.Target{All: true})
	if err != nil {
		return v, err
	}
	if hs := volumes.Holders(ms, name); len(hs) > 0 {
		return v, rpc.Errorf(rpc.CodeConflict, "name: a volume %q already exists on %s", name, strings.Join(hs, ", ")).With("field", "name")
	}
	err = rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.CreateVolume, rpc.CreateVolumeRequest{Name: name, SizeBytes: size}, &v)
	return v, err
}

// Inspect describes machine's volume name.
func (rn *Runner) Inspect(ctx context.Context, machine, name string) (rpc.Volume, error) {
	var v rpc.Volume
	err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.InspectVolume, rpc.VolumeRequest{Name: name}, &v)
	return v, err
}

// Remove destroys machine's volume name and its snapshots.
func (rn *Runner) Remove(ctx context.Context, machine, name string) error {
	return rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.RemoveVolume, rpc.VolumeRequest{Name: name}, nil)
}

// Snapshot takes snapshot snap of machine's volume name and answers the
// volume after it.
func (rn *Runner) Snapshot(ctx context.Context, machine, name, snap string) (rpc.Volume, error) {
	var v rpc.Volume
	err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.SnapshotVolume, rpc.SnapshotVolumeRequest{Volume: name, Snapshot: snap}, &v)
	return v, err
}

// SetCopy is one set_volume_copy to machine (a run's step, for repair
// and tests): its copy of req.Volume from req.Expect to req.Want.
func (rn *Runner) SetCopy(ctx context.Context, machine string, req rpc.SetVolumeCopyRequest) (rpc.VolumeCopySet, error) {
	var out rpc.VolumeCopySet
	err := rpc.InvokeInto(ctx, rn.Entry, rpc.Target{One: machine}, rpc.SetVolumeCopy, req, &out)
	return out, err
}
