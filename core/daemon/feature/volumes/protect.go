package volumes

// Volume protection on a schedule (docs/volumes.md, "Protection on a
// schedule"): put_volume_policies stores a deploy's x-volume policies,
// and the protect loop, a Machine-local loop like the jobs loop, runs
// core/volprotect's Protector: the Machine holding a volume's Writer
// takes its automatic snapshots and prunes them to the retention; and
// its Mirrorer, which keeps the declared Mirror in Sync (mirror.go).

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	sdkstore "github.com/ployz/ployz/sdk/store"
	"github.com/ployz/ployz/sdk/volume"
)

// protectPeriod bounds the protect loop's sleep: a new policy, a Writer
// that moved here are seen within it.
const protectPeriod = time.Minute

func (f *Feature) policyRoutes() []rpc.Route {
	return []rpc.Route{rpc.Bind(rpc.PutVolumePolicies, f.putVolumePolicies)}
}

// putVolumePolicies stores a namespace's volume policies (a deploy's),
// keeping each one's Since.
func (f *Feature) putVolumePolicies(ctx context.Context, req rpc.PutVolumePoliciesRequest) (rpc.VolumePoliciesPut, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.VolumePoliciesPut{}, err
	}
	return putVolumePolicies(ctx, st, f.host.MachineID(), req, time.Now())
}

func putVolumePolicies(ctx context.Context, st *sdkstore.Client, owner string, req rpc.PutVolumePoliciesRequest, now time.Time) (rpc.VolumePoliciesPut, error) {
	t := store.VolumePolicies(st)
	out := rpc.VolumePoliciesPut{Stored: []string{}}
	for _, p := range req.Policies {
		since := now.UnixMilli()
		if old, ok, err := t.Get(ctx, p.Volume); err != nil {
			return rpc.VolumePoliciesPut{}, rpc.Errorf(rpc.CodeUnavailable, "read volume policy %s: %v", p.Volume, err)
		} else if ok && old.Body.Since > 0 {
			since = old.Body.Since
		}
		body := store.VolumePolicyBody{Namespace: req.Namespace, Volume: p.Volume, Deployment: req.Deployment, Since: since, Policy: p.Policy}
		if _, err := t.Put(ctx, sdkstore.Row[store.VolumePolicyBody]{Key: p.Volume, Owner: owner, Body: body}); err != nil {
			return rpc.VolumePoliciesPut{}, rpc.Errorf(rpc.CodeUnavailable, "write volume policy %s: %v", p.Volume, err)
		}
		out.Stored = append(out.Stored, p.Volume)
	}
	if !req.Prune {
		return out, nil
	}
	rows, err := t.Where(ctx, "WHERE json_extract(body, '$.namespace') = ?", req.Namespace)
	if err != nil {
		return rpc.VolumePoliciesPut{}, rpc.Errorf(rpc.CodeUnavailable, "read volume policies of %s: %v", req.Namespace, err)
	}
	for _, r := range rows {
		if slices.Contains(out.Stored, r.Key) {
			continue
		}
		if _, err := t.Delete(ctx, r.Key); err != nil {
			return rpc.VolumePoliciesPut{}, rpc.Errorf(rpc.CodeUnavailable, "delete volume policy %s: %v", r.Key, err)
		}
		out.Removed = append(out.Removed, r.Key)
	}
	return out, nil
}

// ProtectLoop runs the Protector while this Machine participates and has
// a ZFS pool; it sleeps until the next snapshot is due, at most
// protectPeriod.
func (f *Feature) ProtectLoop(ctx context.Context) {
	w := f.host.WatchStore(ctx, `SELECT id, body FROM volume_policies`)
	for {
		wait := protectPeriod
		if p := f.newProtector(); p != nil && f.host.Machine().Phase == machine.Participating && f.host.Machine().Labels[volume.PoolLabel] != "" {
			next, err := p.Round(ctx)
			if err != nil && ctx.Err() == nil {
				f.log.Warn("volume protection: round", "error", err)
			}
			if until := time.Until(next); !next.IsZero() && until < wait {
				wait = max(until, time.Second)
			}
			if m := f.mirrorer(); m != nil {
				next, err := m.Round(ctx)
				if err != nil && ctx.Err() == nil {
					f.log.Warn("volume protection: scheduled sync", "error", err)
				}
				if until := time.Until(next); !next.IsZero() && until < wait {
					wait = max(until, time.Second)
				}
			}
		}
		if !feature.Pause(ctx, w, wait) {
			if m := f.mirror; m != nil {
				m.Wait() // the runs in flight end with ctx
			}
			return
		}
	}
}

// newProtector is this Machine's Protector, nil until it has a store.
func (f *Feature) newProtector() *volprotect.Protector {
	st, err := f.host.Store()
	if err != nil {
		return nil
	}
	return volprotect.New(volprotect.Config{
		Policies: func(ctx context.Context) ([]volprotect.Declared, error) { return storedPolicies(ctx, st) },
		IsWriter: func(name string) bool { return f.CopyRoles()[name].Role == volumecopy.Writer },
		Volumes:  pluginVolumes{f},
		Lags: func(ctx context.Context, name string) ([]volprotect.Lag, error) {
			return storedLags(ctx, st, f.host.Machine().Name, name)
		},
		Outcomes: &f.protectOutcomes,
		Log:      f.log.Named("protect"),
	})
}

// storedLags are the last syncs of writer's volume's Mirrors, from the
// Cluster's Volume Runs (a record that does not decode is skipped).
func storedLags(ctx context.Context, st *sdkstore.Client, writer, volume string) ([]volprotect.Lag, error) {
	rows, err := store.VolumeRunsOf(ctx, st, volume)
	if err != nil {
		return nil, err
	}
	var runs []volprotect.Run
	for _, r := range rows {
		var run volprotect.Run
		if json.Unmarshal(r.Body.Run, &run) == nil {
			run.State = r.Body.State // the Cluster's word (a run marked lost)
			runs = append(runs, run)
		}
	}
	return volprotect.Lags(writer, runs), nil
}

// storedPolicies are the volume_policies rows a reader can act on; a row
// from a newer writer it cannot validate is left out.
func storedPolicies(ctx context.Context, st *sdkstore.Client) ([]volprotect.Declared, error) {
	rows, err := store.VolumePolicies(st).List(ctx)
	if err != nil {
		return nil, err
	}
	var out []volprotect.Declared
	for _, r := range rows {
		if r.Body.Policy.Validate() == nil {
			out = append(out, volprotect.Declared{Volume: r.Key, Policy: r.Body.Policy})
		}
	}
	return out, nil
}

// pluginVolumes is this Machine's volume plugin as the Protector's
// Volumes: taking a snapshot goes through snapshot_volume's own path.
type pluginVolumes struct{ f *Feature }

func (v pluginVolumes) Snapshots(ctx context.Context, name string) ([]volprotect.Snapshot, error) {
	vol, err := v.f.inspectVolume(ctx, rpc.VolumeRequest{Name: name})
	if err != nil {
		return nil, err
	}
	out := make([]volprotect.Snapshot, 0, len(vol.Snapshots))
	for _, s := range vol.Snapshots {
		out = append(out, volprotect.Snapshot{Name: s.Name, Created: time.Unix(0, s.Created)})
	}
	return out, nil
}

func (v pluginVolumes) Take(ctx context.Context, name, snap string) error {
	_, err := v.f.snapshotVolume(ctx, rpc.SnapshotVolumeRequest{Volume: name, Snapshot: snap})
	return err
}

func (v pluginVolumes) Destroy(ctx context.Context, name, snap string) error {
	return v.f.callVolume(ctx, volume.CapPrune, func(ctx context.Context, c volumev1.VolumeClient) error {
		_, err := c.DestroySnapshot(ctx, &volumev1.DestroySnapshotRequest{Volume: name, Snapshot: snap})
		return err
	})
}
