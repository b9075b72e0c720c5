package fakecluster

import (
	"cmp"
	"slices"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// volumeRunRoutes answer begin_volume_run, put_volume_run and
// list_volume_runs from one table in memory with the entry's rules
// (store.NextVolumeRun against the entry's leases), unless the Cluster
// plays an entry from before them.
func (fc *Cluster) volumeRunRoutes(srv *rpc.Server, m *Machine) {
	if fc.o.NoVolumeRuns {
		return
	}
	HandleMethod(fc, srv, m, rpc.BeginVolumeRun, valid(fc.beginRun))
	HandleMethod(fc, srv, m, rpc.PutVolumeRun, valid(fc.putRun))
	HandleMethod(fc, srv, m, rpc.ListVolumeRuns, valid(func(req rpc.ListVolumeRunsRequest) (rpc.VolumeRunList, error) {
		return fc.listRuns(req), nil
	}))
}

// volumeLease is volume's lease as the entry's store holds it.
func (fc *Cluster) volumeLease(volume string) *store.LeaseBody {
	l, ok := fc.leases["volume:"+volume]
	if !ok {
		return nil
	}
	return &store.LeaseBody{Nonce: l.nonce, Expires: l.Expires}
}

func (fc *Cluster) runsOf(volume string) []sdkstore.Row[store.VolumeRunBody] {
	var rows []sdkstore.Row[store.VolumeRunBody]
	for _, r := range fc.runs {
		if volume == "" || r.Body.Volume == volume {
			rows = append(rows, r)
		}
	}
	store.SortVolumeRuns(rows, volume)
	return rows
}

func (fc *Cluster) beginRun(req rpc.BeginVolumeRunRequest) (rpc.VolumeRunBegun, error) {
	lease, now := fc.volumeLease(req.Volume), time.Now().UnixMilli()
	if req.LeaseNonce != "" && (lease == nil || !lease.Live(now) || lease.Nonce != req.LeaseNonce) {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeFailedPrecond, "lease volume:%s is not the caller's", req.Volume)
	}
	lost, held, gen := store.NextVolumeRun(fc.runsOf(req.Volume), lease, req.Floor, now)
	if held != nil {
		return rpc.VolumeRunBegun{}, rpc.Errorf(rpc.CodeConflict, "volume %s has an open %s run (gen %d, by %s): one run per Volume",
			req.Volume, held.Body.Kind, held.Body.Gen, held.Body.Operator.Name).With("gen", held.Body.Gen)
	}
	out := rpc.VolumeRunBegun{Gen: gen}
	for _, r := range lost {
		r.Body.State, r.Body.Error, r.Body.UpdatedAt = store.VolumeRunLost, "its driver's volume lease ended without finishing it", now
		fc.runs[r.Key] = r
		out.Lost = append(out.Lost, r.Body.Gen)
	}
	key := store.VolumeRunKey(req.Volume, gen)
	fc.runs[key] = sdkstore.Row[store.VolumeRunBody]{Key: key, Body: store.VolumeRunBody{Volume: req.Volume, Gen: gen, Kind: req.Kind,
		State: store.VolumeRunOpen, StartedAt: req.StartedAt, UpdatedAt: req.StartedAt, Operator: req.Operator,
		Lease: store.LeaseTag(req.LeaseNonce), Run: req.Run}}
	return out, nil
}

func (fc *Cluster) putRun(req rpc.PutVolumeRunRequest) (rpc.VolumeRunPut, error) {
	key := store.VolumeRunKey(req.Volume, req.Gen)
	row, ok := fc.runs[key]
	switch {
	case ok && req.Import:
		return rpc.VolumeRunPut{Existing: true}, nil
	case !ok && !req.Import:
		return rpc.VolumeRunPut{}, rpc.Errorf(rpc.CodeNotFound, "volume %s has no run gen %d", req.Volume, req.Gen)
	case !ok:
		row = sdkstore.Row[store.VolumeRunBody]{Key: key, Body: store.VolumeRunBody{Volume: req.Volume, Gen: req.Gen, Kind: req.Kind,
			StartedAt: req.StartedAt, Operator: req.Operator}}
	}
	row.Body = row.Body.Recorded(req.Run, req.State, req.Error, req.UpdatedAt)
	fc.runs[key] = row
	return rpc.VolumeRunPut{}, nil
}

func (fc *Cluster) listRuns(req rpc.ListVolumeRunsRequest) rpc.VolumeRunList {
	out := rpc.VolumeRunList{Runs: []store.VolumeRunBody{}}
	now := time.Now().UnixMilli()
	for _, r := range fc.runsOf(req.Volume) {
		if req.Kind != "" && r.Body.Kind != req.Kind {
			continue
		}
		b := r.Body
		if b.State == store.VolumeRunOpen && !store.VolumeRunHeld(b, fc.volumeLease(b.Volume), now) {
			b.State = store.VolumeRunLost
		}
		out.Runs = append(out.Runs, b)
	}
	out.Runs = out.Runs[:min(len(out.Runs), cmp.Or(req.Limit, rpc.HistoryDefaultLimit))]
	return out
}

// VolumeRunCount is how many Volume Runs the Cluster holds.
func (fc *Cluster) VolumeRunCount() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.runs)
}

// VolumeRunsOf are the Cluster's runs of volume, newest gen first.
func (fc *Cluster) VolumeRunsOf(volume string) []store.VolumeRunBody {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []store.VolumeRunBody
	for _, r := range fc.runsOf(volume) {
		out = append(out, r.Body)
	}
	return slices.Clip(out)
}
