package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// importVolumeRuns writes the Volume Runs this computer's store kept
// (before the Cluster kept them) into the Cluster, once: each under its
// volume and gen, written only where the Cluster has none, so an import
// run again moves nothing twice. ran is false when an earlier import
// did it, or the entry keeps no runs (asked again next time).
func (s *Session) importVolumeRuns(ctx context.Context, rep *ImportReport) (ran bool, err error) {
	if done, err := s.st.VolumeRunsImportedToCluster(s.name); err != nil || done {
		return false, err
	}
	runs, err := s.st.AllVolumeRuns(s.name)
	if err != nil {
		return false, err
	}
	who := s.Operator().History()
	for _, r := range runs {
		var out rpc.VolumeRunPut
		err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.PutVolumeRun, importedRun(r, who), &out)
		if Unsupported(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("import volume run %s gen %d: %w", r.Volume, r.Gen, err)
		}
		if !out.Existing {
			rep.VolumeRuns++
		}
	}
	return true, s.st.MarkVolumeRunsImportedToCluster(s.name, time.Now())
}

// importedRun is a local run as the Cluster keeps it, naming this
// computer's operator as its driver.
func importedRun(r operator.VolumeRun, who store.HistoryOperator) rpc.PutVolumeRunRequest {
	if r.Operator == "" {
		r.Operator = who.Name
	}
	if len(r.Error) > 4096 {
		r.Error = r.Error[:4096]
	}
	raw, _ := json.Marshal(r) // a VolumeRun always encodes
	started := max(r.Started.UnixMilli(), 1)
	return rpc.PutVolumeRunRequest{Volume: r.Volume, Gen: r.Gen, Kind: r.Kind, State: r.State, Error: r.Error, StartedAt: started,
		UpdatedAt: max(r.Updated.UnixMilli(), started), Operator: who, Import: true, Run: raw}
}
