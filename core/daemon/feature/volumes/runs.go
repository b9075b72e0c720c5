package volumes

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// volumeRunMu serializes begin_volume_run and put_volume_run on this
// Machine. Across entries the volume's lease serializes runs: the
// library begins a run only holding volume:<name>, so two entries never
// number one volume's runs at once.
var volumeRunMu sync.Mutex

// lostRunError is the error a run marked lost by the next one records.
const lostRunError = "its driver's volume lease ended without finishing it"

func (f *Feature) runRoutes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.BeginVolumeRun, f.beginVolumeRun),
		rpc.Bind(rpc.PutVolumeRun, f.putVolumeRun),
		rpc.Bind(rpc.ListVolumeRuns, f.listVolumeRuns),
	}
}

// volumeLease reads volume's lease row (nil: none).
func volumeLease(ctx context.Context, st *sdkstore.Client, volume string) (*store.LeaseBody, error) {
	row, ok, err := store.Leases(st).Get(ctx, "volume:"+volume)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "read lease volume:%s: %v", volume, err)
	}
	if !ok {
		return nil, nil
	}
	return &row.Body, nil
}

// beginVolumeRun numbers a new run above every gen of its volume and
// the caller's floor, marking lost the open runs whose driver's lease is
// gone; a run still held refuses it. A caller naming a lease it no
// longer holds is refused too: it lost the volume to another.
func (f *Feature) beginVolumeRun(ctx context.Context, req rpc.BeginVolumeRunRequest) (rpc.VolumeRunBegun, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.VolumeRunBegun{}, err
	}
	volumeRunMu.Lock()
	defer volumeRunMu.Unlock()
	lease, err := volumeLease(ctx, st, req.Volume)
	if err != nil {
		return rpc.VolumeRunBegun{}, err
	}
	now := time.Now().UnixMilli()
	if req.LeaseNonce != "" && (lease == nil || !lease.Live(now) || lease.Nonce != req.LeaseNonce) {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeFailedPrecond, "lease volume:%s is not the caller's: take it before a run", req.Volume).With("field", "lease_nonce")
	}
	rows, err := store.VolumeRunsOf(ctx, st, req.Volume)
	if err != nil {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeUnavailable, "read volume runs: %v", err)
	}
	lost, held, gen := store.NextVolumeRun(rows, lease, req.Floor, now)
	if held != nil {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeConflict, "volume %s has an open %s run (gen %d, started %s by %s) whose driver holds the volume: one run per Volume",
			req.Volume, held.Body.Kind, held.Body.Gen, time.UnixMilli(held.Body.StartedAt).UTC().Format(time.RFC3339), held.Body.Operator.Name).
			With("gen", held.Body.Gen)
	}
	out := rpc.VolumeRunBegun{Gen: gen}
	for _, r := range lost {
		r.Body.State, r.Body.Error, r.Body.UpdatedAt = store.VolumeRunLost, lostRunError, now
		if _, err := store.VolumeRuns(st).Put(ctx, r); err != nil {
			return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeUnavailable, "mark volume run %s lost: %v", r.Key, err)
		}
		out.Lost = append(out.Lost, r.Body.Gen)
	}
	row := sdkstore.Row[store.VolumeRunBody]{Key: store.VolumeRunKey(req.Volume, gen), Owner: f.host.MachineID(), Body: store.VolumeRunBody{
		Volume: req.Volume, Gen: gen, Kind: req.Kind, State: store.VolumeRunOpen, StartedAt: req.StartedAt, UpdatedAt: req.StartedAt,
		Operator: req.Operator, Lease: store.LeaseTag(req.LeaseNonce), Run: req.Run}}
	if _, err := store.VolumeRuns(st).Put(ctx, row); err != nil {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeUnavailable, "write volume run: %v", err)
	}
	return out, nil
}

// putVolumeRun rewrites a begun run's record; a run marked lost stays
// lost until its driver records an end. With Import it writes a run the
// Cluster lacks and leaves one it holds.
func (f *Feature) putVolumeRun(ctx context.Context, req rpc.PutVolumeRunRequest) (rpc.VolumeRunPut, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.VolumeRunPut{}, err
	}
	volumeRunMu.Lock()
	defer volumeRunMu.Unlock()
	key := store.VolumeRunKey(req.Volume, req.Gen)
	row, ok, err := store.VolumeRuns(st).Get(ctx, key)
	switch {
	case err != nil:
		return rpc.VolumeRunPut{}, rpc.Errorf(rpc.CodeUnavailable, "read volume run %s: %v", key, err)
	case ok && req.Import:
		return rpc.VolumeRunPut{Existing: true}, nil
	case !ok && !req.Import:
		return rpc.VolumeRunPut{}, rpc.Errorf(rpc.CodeNotFound, "volume %s has no run gen %d: begin it first", req.Volume, req.Gen).With("field", "gen")
	case !ok:
		row = sdkstore.Row[store.VolumeRunBody]{Key: key, Owner: f.host.MachineID(), Body: store.VolumeRunBody{Volume: req.Volume, Gen: req.Gen,
			Kind: req.Kind, StartedAt: req.StartedAt, Operator: req.Operator}}
	}
	row.Body = row.Body.Recorded(req.Run, req.State, req.Error, req.UpdatedAt)
	if _, err := store.VolumeRuns(st).Put(ctx, row); err != nil {
		return rpc.VolumeRunPut{}, rpc.Errorf(rpc.CodeUnavailable, "write volume run %s: %v", key, err)
	}
	return rpc.VolumeRunPut{}, nil
}

// listVolumeRuns answers the newest runs of one volume or all, of a
// kind when asked; an open run whose driver's lease is gone is answered
// lost, as the next run will record it.
func (f *Feature) listVolumeRuns(ctx context.Context, req rpc.ListVolumeRunsRequest) (rpc.VolumeRunList, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.VolumeRunList{}, err
	}
	rows, err := store.VolumeRunsOf(ctx, st, req.Volume)
	if err != nil {
		return rpc.VolumeRunList{}, rpc.Errorf(rpc.CodeUnavailable, "read volume runs: %v", err)
	}
	leases := map[string]*store.LeaseBody{}
	now := time.Now().UnixMilli()
	out := rpc.VolumeRunList{Runs: []store.VolumeRunBody{}}
	for _, r := range rows {
		if len(out.Runs) == cmp.Or(req.Limit, rpc.HistoryDefaultLimit) {
			break
		}
		if req.Kind != "" && r.Body.Kind != req.Kind {
			continue
		}
		if r.Body.State == store.VolumeRunOpen {
			if _, seen := leases[r.Body.Volume]; !seen {
				if leases[r.Body.Volume], err = volumeLease(ctx, st, r.Body.Volume); err != nil {
					return rpc.VolumeRunList{}, err
				}
			}
			if !store.VolumeRunHeld(r.Body, leases[r.Body.Volume], now) {
				r.Body.State, r.Body.Error = store.VolumeRunLost, lostRunError
			}
		}
		out.Runs = append(out.Runs, r.Body)
	}
	return out, nil
}
