package volumes

// A volume's snapshots with what its retention keeps, and the return to
// one (docs/volumes.md, "Snapshots: list and restore"):
// list_volume_snapshots reads the plugin's snapshots and the stored
// x-volume policy; rollback_volume admits the rollback against this
// Machine's copy (core/volumecopy) and runs the plugin's Rollback.

import (
	"context"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	sdkstore "github.com/ployz/ployz/sdk/store"
	"github.com/ployz/ployz/sdk/volume"
)

func (f *Feature) snapshotRoutes() []rpc.Route {
	ls := rpc.Bind(rpc.ListVolumeSnapshots, f.listVolumeSnapshots)
	ls.Available = func() bool { return f.available(volume.CapInspect) }
	rb := rpc.Bind(rpc.RollbackVolume, f.rollbackVolume)
	rb.Available = func() bool { return f.available(volume.CapRollback) }
	return []rpc.Route{ls, rb}
}

func (f *Feature) listVolumeSnapshots(ctx context.Context, req rpc.VolumeRequest) (rpc.VolumeSnapshots, error) {
	v, err := f.inspectVolume(ctx, req)
	if err != nil {
		return rpc.VolumeSnapshots{}, err
	}
	out := rpc.VolumeSnapshots{MachineID: f.host.MachineID(), Volume: v.Name, Copy: v.Copy}
	// The policy is the Cluster's: unreadable, the snapshots are still
	// listed, and the answer says why retention is unknown.
	st, err := f.host.Store()
	if err == nil {
		out.Retention, err = storedRetention(ctx, st, v.Name)
	}
	if err != nil {
		out.Note = "retention unknown: " + err.Error()
	}
	out.Snapshots = snapshotInfos(v.Snapshots, out.Retention, time.Now())
	return out, nil
}

// storedRetention is volume's stored x-volume retention, nil when none
// is declared (or it keeps no snapshots).
func storedRetention(ctx context.Context, st *sdkstore.Client, name string) (*volprotect.Retention, error) {
	row, ok, err := store.VolumePolicies(st).Get(ctx, name)
	if err != nil || !ok || !row.Body.Policy.Snapshots.Any() {
		return nil, err
	}
	r := row.Body.Policy.Snapshots
	return &r, nil
}

// snapshotInfos annotates snaps (oldest first) with what retention r
// keeps at now, as the Protector's next round would decide (nil r: no
// policy, so nothing is pruned and nothing is marked kept).
func snapshotInfos(snaps []rpc.VolumeSnapshot, r *volprotect.Retention, now time.Time) []rpc.VolumeSnapshotInfo {
	rules := map[string][]string{}
	if r != nil {
		in := make([]volprotect.Snapshot, 0, len(snaps))
		for _, s := range snaps {
			in = append(in, volprotect.Snapshot{Name: s.Name, Created: time.Unix(0, s.Created)})
		}
		for _, k := range volprotect.Keep(in, *r, now).Keep {
			rules[k.Name] = k.Why
		}
	}
	out := make([]rpc.VolumeSnapshotInfo, 0, len(snaps))
	for _, s := range snaps {
		why, kept := rules[s.Name]
		out = append(out, rpc.VolumeSnapshotInfo{Name: s.Name, Created: s.Created, UsedBytes: s.UsedBytes, GUID: s.GUID,
			Auto: volprotect.IsAuto(s.Name), Kept: kept, Rules: why})
	}
	return out
}

// rollbackVolume returns this Machine's copy of a volume to a snapshot:
// admitted in the volume's turn of the copy store (the Writer, the run's
// gen not below its floor, no running Container on it, no task on it),
// then the plugin's Rollback runs in that turn too. The answer is built
// after the turn ends: it reads the copy store.
func (f *Feature) rollbackVolume(ctx context.Context, req rpc.RollbackVolumeRequest) (rpc.VolumeRolledBack, error) {
	if err := req.Validate(); err != nil {
		return rpc.VolumeRolledBack{}, err
	}
	pool, err := f.needPool()
	if err != nil {
		return rpc.VolumeRolledBack{}, err
	}
	cs, err := f.volumeCopies()
	if err != nil {
		return rpc.VolumeRolledBack{}, err
	}
	facts := func() (volumecopy.Facts, error) {
		fs, err := f.copyFacts(ctx, req.Volume)
		fs.Busy = f.tasks.Running(req.Volume)
		return fs, err
	}
	var resp *volumev1.RollbackResponse
	err = cs.Rollback(ctx, req.Volume, req.Gen, facts, func() error {
		return f.callVolume(ctx, volume.CapRollback, func(ctx context.Context, c volumev1.VolumeClient) error {
			var err error
			resp, err = c.Rollback(ctx, &volumev1.RollbackRequest{Volume: req.Volume, Snapshot: req.Snapshot, DestroyNewer: req.DestroyNewer})
			return err
		})
	})
	if err != nil {
		return rpc.VolumeRolledBack{}, err
	}
	out := rpc.VolumeRolledBack{MachineID: f.host.MachineID(), Volume: f.volumeOf(pool, resp.GetVolume()), Destroyed: resp.GetDestroyed()}
	f.log.Info("volume rolled back", "volume", req.Volume, "gen", req.Gen, "snapshot", req.Snapshot, "destroyed", out.Destroyed)
	return out, nil
}
