package volumerun

import (
	"fmt"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// recordHistory records the ended run in the Cluster's history, naming
// the Runner's Operator (nothing when it names none); a write that fails
// is a warning, never the run's error.
func (r *volumeRun) recordHistory(err error) {
	if r.Operator.Name == "" {
		return
	}
	detail := fmt.Sprintf("%s run of volume %s, gen %d", r.run.Kind, r.run.Volume, r.run.Gen)
	if r.run.Target != "" {
		detail += ", target " + r.run.Target
	}
	if r.run.State != "" {
		detail += ": " + r.run.State
	}
	if r.run.Error != "" {
		detail += ": " + r.run.Error
	}
	outcome := operator.HistoryOutcome(r.ctx, err, nil)
	if r.run.State == operator.RunUndone {
		outcome = rpc.OutcomeFailed // it put the source back: nothing moved
	}
	e := rpc.HistoryEntry{ID: operator.NewHistoryID(), HistoryBody: store.HistoryBody{Kind: rpc.HistoryVolumeRun,
		Operator: r.Operator.History(), StartedAt: r.run.Started.UnixMilli(), FinishedAt: max(time.Now().UnixMilli(), r.run.Started.UnixMilli()),
		Outcome: outcome, Detail: operator.ShortDetail(detail)}}
	if err := operator.RecordHistory(r.ctx, r.Entry, e); err != nil {
		r.emit(Event{Kind: EventWarning, Text: err.Error()})
	}
}
