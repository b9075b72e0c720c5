package volumerun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// The run book: Volume Runs are recorded in the Cluster (volume_runs,
// through the entry), so every operator's runs number on from one
// another's gens, list together, and a Move one operator left short is
// finished by another. Against an entry that keeps none (an older
// release) the operator store numbers and keeps them, as before.

// operatorName is who the Cluster says drove a run: the Runner's
// Operator, else the default (user@host).
func (rn *Runner) operatorName() operator.Operator {
	if rn.Operator.Name != "" {
		return rn.Operator
	}
	return operator.Operator{Name: operator.DefaultOperatorName()}
}

// beginRecord opens the run's record with the next gen: the Cluster's
// (local false), else this store's.
func (rn *Runner) beginRecord(ctx context.Context, cp Copies, kind, target string) (r operator.VolumeRun, local bool, err error) {
	now := time.Now()
	host, _ := os.Hostname()
	r = operator.VolumeRun{Context: rn.Context, Volume: cp.Name, Kind: kind, Target: target, State: operator.RunOpen,
		Started: now, Updated: now, Host: host, Pid: os.Getpid(), Steps: []operator.RunStep{}, Operator: rn.operatorName().Name}
	if rn.Entry != nil {
		r.Gen, err = rn.clusterBegin(ctx, cp, r)
		if err == nil || !unsupported(err) {
			return r, false, err
		}
	}
	if rn.Store == nil {
		return operator.VolumeRun{}, true, errors.New("volume runs: no operator store to record the run in")
	}
	r, err = rn.Store.BeginVolumeRunAbove(rn.Context, cp.Name, kind, target, cp.floor(), now)
	return r, true, err
}

// clusterBegin asks the entry to open r under the volume's lease (the
// one ctx holds) and answers its gen.
func (rn *Runner) clusterBegin(ctx context.Context, cp Copies, r operator.VolumeRun) (uint64, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	var out rpc.VolumeRunBegun
	err = rpc.InvokeInto(ctx, rn.Entry, rpc.Target{}, rpc.BeginVolumeRun, rpc.BeginVolumeRunRequest{Volume: cp.Name, Kind: r.Kind, Floor: cp.floor(),
		StartedAt: r.Started.UnixMilli(), Operator: rn.operatorName().History(), LeaseNonce: leasehold.Nonce(ctx, leasehold.VolumeScope(cp.Name)), Run: raw}, &out)
	if err != nil && !unsupported(err) {
		return 0, fmt.Errorf("begin a %s run of volume %s in the Cluster: %w", r.Kind, cp.Name, err)
	}
	return out.Gen, err
}

// saveRecord rewrites the run's record where it was begun.
func (r *volumeRun) saveRecord() error {
	if r.local {
		return r.Store.SaveVolumeRun(r.run)
	}
	raw, err := json.Marshal(r.run)
	if err != nil {
		return err
	}
	return rpc.InvokeInto(context.WithoutCancel(r.ctx), r.Entry, rpc.Target{}, rpc.PutVolumeRun, rpc.PutVolumeRunRequest{Volume: r.run.Volume,
		Gen: r.run.Gen, State: r.run.State, Error: r.run.Error, UpdatedAt: r.run.Updated.UnixMilli(), Run: raw}, nil)
}

// clusterRuns asks the entry for runs; local is true when it keeps none.
func (rn *Runner) clusterRuns(ctx context.Context, req rpc.ListVolumeRunsRequest) (runs []operator.VolumeRun, local bool, err error) {
	if rn.Entry == nil {
		return nil, true, nil
	}
	var out rpc.VolumeRunList
	err = rpc.InvokeInto(ctx, rn.Entry, rpc.Target{}, rpc.ListVolumeRuns, req, &out)
	if unsupported(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("volume runs: %w", err)
	}
	for _, rec := range out.Runs {
		runs = append(runs, rn.fromCluster(rec))
	}
	return runs, false, nil
}

// fromCluster is a Cluster record as the run it is; the Cluster's
// state and error are the run's (it marks runs lost).
func (rn *Runner) fromCluster(rec store.VolumeRunBody) operator.VolumeRun {
	var r operator.VolumeRun
	_ = json.Unmarshal(rec.Run, &r) // tolerant: what parses is kept, the row's own fields rule
	r.Context, r.Volume, r.Gen, r.Kind, r.State = rn.Context, rec.Volume, rec.Gen, rec.Kind, rec.State
	if rec.Error != "" || r.State == operator.RunLost {
		r.Error = rec.Error
	}
	if r.Started.IsZero() {
		r.Started = time.UnixMilli(rec.StartedAt).UTC()
	}
	if r.Updated.IsZero() {
		r.Updated = time.UnixMilli(rec.UpdatedAt).UTC()
	}
	if r.Steps == nil {
		r.Steps = []operator.RunStep{}
	}
	r.Operator = rec.Operator.Name
	return r
}

// LastRun is volume's newest run of kind, any operator's (false when
// there is none): a Move or Release finishes from it.
func (rn *Runner) LastRun(ctx context.Context, volume, kind string) (operator.VolumeRun, bool, error) {
	runs, local, err := rn.clusterRuns(ctx, rpc.ListVolumeRunsRequest{Volume: volume, Kind: kind, Limit: 1})
	switch {
	case err != nil:
		return operator.VolumeRun{}, false, err
	case local && rn.Store == nil:
		return operator.VolumeRun{}, false, nil
	case local:
		return rn.Store.LastVolumeRun(rn.Context, volume, kind)
	case len(runs) == 0:
		return operator.VolumeRun{}, false, nil
	}
	return runs[0], true, nil
}

// Runs are the runs of volume ("" for all), every operator's, newest
// first, at most limit.
func (rn *Runner) Runs(ctx context.Context, volume string, limit int) ([]operator.VolumeRun, error) {
	if limit < 1 || limit > rpc.HistoryMaxLimit {
		return nil, fmt.Errorf("limit: %d: want 1 to %d", limit, rpc.HistoryMaxLimit)
	}
	runs, local, err := rn.clusterRuns(ctx, rpc.ListVolumeRunsRequest{Volume: volume, Limit: limit})
	switch {
	case err != nil:
		return nil, err
	case local && rn.Store == nil:
		return []operator.VolumeRun{}, nil
	case local:
		return rn.Store.VolumeRuns(rn.Context, volume, limit)
	}
	return append([]operator.VolumeRun{}, runs...), nil
}

// unsupported reports whether err is an entry refusing a command it does
// not serve (an older release).
func unsupported(err error) bool {
	var e *rpc.Error
	return errors.As(err, &e) && e.Code == rpc.CodeUnsupported
}
