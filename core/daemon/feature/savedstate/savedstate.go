// Package savedstate is the daemon's Saved State feature: the revisions
// an operator deployed (their compose sealed with the Cluster secret) and
// the deploy records, in the replicated store (save_revision,
// list_revisions, put_deploy_record, list_deploy_records).
package savedstate

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// revisionMu serializes save_revision on this Machine, so the revisions
// it stamps have distinct, growing created_at. Two entries writing at
// once may still stamp out of order; numbering on read (numberRevisions)
// then keeps both, in (created_at, id) order.
var revisionMu sync.Mutex

// defaultDeployRecords is list_deploy_records' limit when none is given.
const defaultDeployRecords = 200

// Host is what the feature needs of the daemon.
type Host interface {
	feature.StoreHost
	// DataDir holds this Machine's Cluster secret, which seals composes.
	DataDir() string
}

// Feature serves the Saved State commands.
type Feature struct{ host Host }

// New returns the feature over host.
func New(host Host) *Feature { return &Feature{host: host} }

// Routes are the Saved State commands.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.SaveRevision, f.saveRevision),
		rpc.Bind(rpc.ListRevisions, f.listRevisions),
		rpc.Bind(rpc.PutDeployRecord, f.putDeployRecord),
		rpc.Bind(rpc.ListDeployRecords, f.listDeployRecords),
	}
}

// composeSealer seals and opens revisions' compose files with this
// Machine's Cluster secret.
func (f *Feature) composeSealer() (*store.Sealer, error) {
	return feature.ClusterSealer(f.host.DataDir(), store.SavedStatePurpose, "revisions", "compose", "Saved State")
}

// saveRevision writes one revision, its compose sealed, and answers its
// number. Saving an id that exists answers that revision unchanged, so
// an import repeated moves nothing twice.
func (f *Feature) saveRevision(ctx context.Context, req rpc.SaveRevisionRequest) (rpc.RevisionSaved, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.RevisionSaved{}, err
	}
	sealer, err := f.composeSealer()
	if err != nil {
		return rpc.RevisionSaved{}, err
	}
	ns := deploy.Namespace(req.Project, req.Environment)
	revisionMu.Lock()
	defer revisionMu.Unlock()
	rows, err := store.ListNamespace(ctx, store.Revisions(st), ns)
	if err != nil {
		return rpc.RevisionSaved{}, rpc.Errorf(rpc.CodeUnavailable, "read revisions: %v", err)
	}
	existing := slices.ContainsFunc(rows, func(r sdkstore.Row[store.RevisionBody]) bool { return r.Key == req.ID })
	if !existing {
		row, err := newRevisionRow(req, ns, rows, sealer, f.host.MachineID())
		if err != nil {
			return rpc.RevisionSaved{}, err
		}
		if _, err := store.Revisions(st).Put(ctx, row); err != nil {
			return rpc.RevisionSaved{}, rpc.Errorf(rpc.CodeUnavailable, "write revision: %v", err)
		}
		rows = append(rows, row)
	}
	numbered := numberRevisions(rows)
	i := slices.IndexFunc(numbered, func(r sdkstore.Row[store.RevisionBody]) bool { return r.Key == req.ID })
	return rpc.RevisionSaved{ID: req.ID, Revision: i + 1, Existing: existing}, nil
}

// newRevisionRow is req's row: stamped above every revision of the
// namespace seen here, compose sealed.
func newRevisionRow(req rpc.SaveRevisionRequest, ns string, rows []sdkstore.Row[store.RevisionBody], sealer *store.Sealer, owner string) (sdkstore.Row[store.RevisionBody], error) {
	body := store.RevisionBody{Namespace: ns, Project: req.Project, Environment: req.Environment, CreatedAt: time.Now().UnixMilli(),
		Operator: req.Operator, Source: req.Source, SourceRevision: req.SourceRevision}
	for _, r := range rows {
		body.CreatedAt = max(body.CreatedAt, r.Body.CreatedAt+1)
	}
	if len(req.Compose) > 0 {
		sealed, err := sealer.Seal(req.ID, req.Compose)
		if err != nil {
			return sdkstore.Row[store.RevisionBody]{}, rpc.Errorf(rpc.CodeInternal, "%v", err)
		}
		body.Compose = sealed
	}
	return sdkstore.Row[store.RevisionBody]{Key: req.ID, Owner: owner, Body: body}, nil
}

// numberRevisions orders a namespace's revisions as every reader numbers
// them: by created_at, then id.
func numberRevisions(rows []sdkstore.Row[store.RevisionBody]) []sdkstore.Row[store.RevisionBody] {
	slices.SortFunc(rows, func(a, b sdkstore.Row[store.RevisionBody]) int {
		return cmp.Or(cmp.Compare(a.Body.CreatedAt, b.Body.CreatedAt), cmp.Compare(a.Key, b.Key))
	})
	return rows
}

// listRevisions answers a namespace's numbered revisions, oldest first,
// their compose files opened when asked.
func (f *Feature) listRevisions(ctx context.Context, req rpc.ListRevisionsRequest) (rpc.RevisionList, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.RevisionList{}, err
	}
	var rows []sdkstore.Row[store.RevisionBody]
	if req.AllNamespaces {
		rows, err = store.Revisions(st).List(ctx)
	} else {
		rows, err = store.ListNamespace(ctx, store.Revisions(st), req.Namespace)
	}
	if err != nil {
		return rpc.RevisionList{}, rpc.Errorf(rpc.CodeUnavailable, "read revisions: %v", err)
	}
	byNamespace := map[string][]sdkstore.Row[store.RevisionBody]{}
	for _, r := range rows {
		byNamespace[r.Body.Namespace] = append(byNamespace[r.Body.Namespace], r)
	}
	out := rpc.RevisionList{Revisions: []rpc.Revision{}}
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		revs, err := f.revisionsOf(numberRevisions(byNamespace[ns]), req)
		if err != nil {
			return rpc.RevisionList{}, err
		}
		out.Revisions = append(out.Revisions, revs...)
	}
	return out, nil
}

// revisionsOf answers the revisions of one namespace's numbered rows
// that req asks for.
func (f *Feature) revisionsOf(numbered []sdkstore.Row[store.RevisionBody], req rpc.ListRevisionsRequest) ([]rpc.Revision, error) {
	var out []rpc.Revision
	for i, r := range numbered {
		n := i + 1
		if (req.Revision != 0 && n != req.Revision) || (req.Latest && n != len(numbered)) {
			continue
		}
		rev := rpc.Revision{ID: r.Key, Namespace: r.Body.Namespace, Project: r.Body.Project, Environment: r.Body.Environment,
			Revision: n, CreatedAt: r.Body.CreatedAt, Operator: r.Body.Operator, Removal: r.Body.Compose == ""}
		if req.WithCompose && !rev.Removal {
			var err error
			if rev.Compose, err = f.openCompose(r); err != nil {
				return nil, err
			}
		}
		out = append(out, rev)
	}
	return out, nil
}

func (f *Feature) openCompose(r sdkstore.Row[store.RevisionBody]) ([]byte, error) {
	sealer, err := f.composeSealer()
	if err != nil {
		return nil, err
	}
	b, err := sealer.Open(r.Key, r.Body.Compose)
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "revision of %s: %v", r.Body.Namespace, err)
	}
	return b, nil
}

// putDeployRecord writes one Deploy's record under its deployment id.
func (f *Feature) putDeployRecord(ctx context.Context, req rpc.PutDeployRecordRequest) (struct{}, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return struct{}{}, err
	}
	row := sdkstore.Row[store.DeployRecordBody]{Key: req.DeploymentID, Owner: f.host.MachineID(), Body: store.DeployRecordBody{
		Namespace: req.Namespace, Revision: req.Revision, StartedAt: req.StartedAt, UpdatedAt: req.UpdatedAt, Record: req.Record}}
	if _, err := store.DeployRecords(st).Put(ctx, row); err != nil {
		return struct{}{}, rpc.Errorf(rpc.CodeUnavailable, "write deploy record: %v", err)
	}
	return struct{}{}, nil
}

// listDeployRecords answers the newest records, of one namespace or all.
func (f *Feature) listDeployRecords(ctx context.Context, req rpc.ListDeployRecordsRequest) (rpc.DeployRecordList, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.DeployRecordList{}, err
	}
	var rows []sdkstore.Row[store.DeployRecordBody]
	if req.Namespace != "" {
		rows, err = store.ListNamespace(ctx, store.DeployRecords(st), req.Namespace)
	} else {
		rows, err = store.DeployRecords(st).List(ctx)
	}
	if err != nil {
		return rpc.DeployRecordList{}, rpc.Errorf(rpc.CodeUnavailable, "read deploy records: %v", err)
	}
	return rpc.DeployRecordList{Records: newestRecords(rows, cmp.Or(req.Limit, defaultDeployRecords))}, nil
}

// newestRecords are at most limit records, newest start first; Deploys
// started in the same millisecond (an import of local records) newest
// revision first.
func newestRecords(rows []sdkstore.Row[store.DeployRecordBody], limit int) []rpc.PutDeployRecordRequest {
	slices.SortFunc(rows, func(a, b sdkstore.Row[store.DeployRecordBody]) int {
		return cmp.Or(cmp.Compare(b.Body.StartedAt, a.Body.StartedAt), cmp.Compare(b.Body.Revision, a.Body.Revision), cmp.Compare(b.Key, a.Key))
	})
	out := []rpc.PutDeployRecordRequest{}
	for _, r := range rows[:min(limit, len(rows))] {
		out = append(out, rpc.PutDeployRecordRequest{DeploymentID: r.Key, Namespace: r.Body.Namespace, Revision: r.Body.Revision,
			StartedAt: r.Body.StartedAt, UpdatedAt: r.Body.UpdatedAt, Record: r.Body.Record})
	}
	return out
}
