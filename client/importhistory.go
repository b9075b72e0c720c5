package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// importHistory records an imported deploy record in the Cluster's
// history, so `ployz history` shows what this computer deployed before
// the Cluster kept history. Its id derives from the deployment, so an
// import run again rewrites the same entry. The importing operator is
// named: an older release's record names nobody.
func (s *Session) importHistory(ctx context.Context, r operator.DeployRow, req rpc.PutDeployRecordRequest) error {
	rec, err := deploy.ParseRecord(req.Record, time.Now())
	if err != nil {
		return fmt.Errorf("import deploy record %s: %w", r.DeploymentID, err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s", s.name, r.DeploymentID))
	detail := "imported from this computer's records of context " + s.name
	if rec.Why != "" {
		detail = rec.Why + " (" + detail + ")"
	}
	e := rpc.HistoryEntry{ID: "imp-" + hex.EncodeToString(sum[:12]), HistoryBody: store.HistoryBody{
		Kind: rpc.HistoryDeploy, Namespace: r.Namespace, Revision: req.Revision, Operator: s.Operator().History(),
		StartedAt: req.StartedAt, FinishedAt: max(req.UpdatedAt, req.StartedAt),
		Outcome: importedOutcome(rec.Status), Detail: operator.ShortDetail(detail)}}
	if err := operator.RecordHistory(ctx, s.ent, e); err != nil {
		return fmt.Errorf("import deploy record %s into history: %w", r.DeploymentID, err)
	}
	return nil
}

// importedOutcome is a local record's status as a history outcome: one
// still running when its CLI stopped never ended, so it failed.
func importedOutcome(status string) string {
	if slices.Contains([]string{rpc.OutcomeCompleted, rpc.OutcomePartial, rpc.OutcomeFailed, rpc.OutcomeCancelled}, status) {
		return status
	}
	return rpc.OutcomeFailed
}
