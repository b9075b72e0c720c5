package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Saved State and deploy records live in the Cluster (revisions and
// deploy_records, through the entry) so a teammate's `ployz rollback`
// finds them; this computer's operator store keeps a copy of what it
// wrote. Revision numbers are the Cluster's: each revision is keyed by
// an id it mints and revisions are numbered per namespace in the order
// the entries stamped them, so two operators deploying at once both keep
// their revision (docs/formats.md). Against an entry that serves none of
// this (an older release), or a namespace the Cluster holds nothing of
// yet, the local store answers as before.

// Unsupported reports a refusal of an entry that does not know the
// command (an older release): callers fall back to the operator store.
func Unsupported(err error) bool {
	var e *rpc.Error
	return errors.As(err, &e) && e.Code == rpc.CodeUnsupported
}

// saveRevision saves compose (nil: a removal) as the next revision of
// project's env, here and in the Cluster, and answers its number: the
// Cluster's, or this store's when the entry keeps no revisions.
func (s *Session) saveRevision(ctx context.Context, project, env string, compose []byte) (int, error) {
	local, err := s.st.SaveState(s.name, project, env, compose)
	if err != nil {
		return 0, err
	}
	var out rpc.RevisionSaved
	err = rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.SaveRevision, rpc.SaveRevisionRequest{ID: newRevisionID(), Project: project,
		Environment: env, Compose: compose, Operator: s.Operator().History()}, &out)
	switch {
	case Unsupported(err):
		return local.Revision, nil
	case err != nil:
		return 0, fmt.Errorf("save revision of %s in the Cluster: %w", deploy.Namespace(project, env), err)
	}
	return out.Revision, nil
}

func newRevisionID() string { return "r-" + deploy.NewID(10) }

// clusterRevisions asks the entry for ns's revisions; local is true when
// the entry keeps none (an older release) or holds none of ns.
func (s *Session) clusterRevisions(ctx context.Context, req rpc.ListRevisionsRequest) (revs []rpc.Revision, local bool, err error) {
	var out rpc.RevisionList
	err = rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListRevisions, req, &out)
	if Unsupported(err) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("revisions of %s: %w", req.Namespace, err)
	}
	if len(out.Revisions) == 0 && (req.Revision == 0 || !s.clusterHolds(ctx, req.Namespace)) {
		return nil, true, nil
	}
	return out.Revisions, false, nil
}

// clusterHolds reports whether the Cluster holds any revision of ns.
func (s *Session) clusterHolds(ctx context.Context, ns string) bool {
	var out rpc.RevisionList
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListRevisions, rpc.ListRevisionsRequest{Namespace: ns, Latest: true}, &out)
	return err == nil && len(out.Revisions) > 0
}

func savedState(ctxName string, r rpc.Revision) operator.SavedState {
	return operator.SavedState{Context: ctxName, Project: r.Project, Environment: r.Environment, Revision: r.Revision,
		Compose: r.Compose, CreatedAt: time.UnixMilli(r.CreatedAt).UTC()}
}

// latestState is p's newest revision, from the Cluster (else this store).
func (s *Session) latestState(ctx context.Context, p Project) (operator.SavedState, error) {
	revs, local, err := s.clusterRevisions(ctx, rpc.ListRevisionsRequest{Namespace: p.Namespace(), Latest: true, WithCompose: true})
	switch {
	case err != nil:
		return operator.SavedState{}, err
	case local:
		return s.st.LatestState(s.name, p.Name, p.Environment)
	}
	return savedState(s.name, revs[0]), nil
}

// stateAt is p's revision rev, from the Cluster (else this store).
func (s *Session) stateAt(ctx context.Context, p Project, rev int) (operator.SavedState, error) {
	revs, local, err := s.clusterRevisions(ctx, rpc.ListRevisionsRequest{Namespace: p.Namespace(), Revision: rev, WithCompose: true})
	switch {
	case err != nil:
		return operator.SavedState{}, err
	case local:
		return s.st.State(s.name, p.Name, p.Environment, rev)
	case len(revs) == 0:
		latest, err := s.latestState(ctx, p)
		if err != nil {
			return operator.SavedState{}, err
		}
		return operator.SavedState{}, fmt.Errorf("revision %d of %s: no such revision (there are 1 to %d)", rev, p.Namespace(), latest.Revision)
	}
	return savedState(s.name, revs[0]), nil
}

// namespaceRecords are ns's deploy records, newest first: the Cluster's,
// else (an older entry, or none there yet) this store's.
func (s *Session) namespaceRecords(ctx context.Context, ns string) ([]deploy.Record, error) {
	var out rpc.DeployRecordList
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListDeployRecords, rpc.ListDeployRecordsRequest{Namespace: ns, Limit: operator.KeepDeploys}, &out)
	if Unsupported(err) || (err == nil && len(out.Records) == 0) {
		return namespaceRecords(s.st, s.name, ns)
	}
	if err != nil {
		return nil, fmt.Errorf("deploy records of %s: %w", ns, err)
	}
	recs := make([]deploy.Record, 0, len(out.Records))
	now := time.Now()
	for _, r := range out.Records {
		rec, err := deploy.ParseRecord(r.Record, now)
		if err != nil {
			return nil, fmt.Errorf("deploy %s: %w", r.DeploymentID, err)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// remoteRecords writes deploy records to the Cluster too; an entry that
// keeps none is asked once.
func (s *Session) remoteRecords(ctx context.Context) func(operator.DeployRow) error {
	skip := false
	return func(r operator.DeployRow) error {
		if skip {
			return nil
		}
		var rev struct {
			Revision int `json:"revision"`
		}
		_ = json.Unmarshal(r.Body, &rev) // the revision is the record's; a reader parses the rest
		err := rpc.InvokeInto(context.WithoutCancel(ctx), s.ent, rpc.Target{}, rpc.PutDeployRecord, rpc.PutDeployRecordRequest{DeploymentID: r.DeploymentID,
			Namespace: r.Namespace, Revision: rev.Revision, StartedAt: r.StartedAt.UnixMilli(), UpdatedAt: r.UpdatedAt.UnixMilli(), Record: r.Body}, nil)
		if Unsupported(err) {
			skip = true
			return nil
		}
		return err
	}
}
