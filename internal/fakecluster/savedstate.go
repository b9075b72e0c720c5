package fakecluster

import (
	"cmp"
	"path/filepath"
	"slices"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// savedState is the Cluster's revisions and deploy records, shared by
// every Machine as the replicated tables are. Revisions are kept in the
// order they were saved, which numbers them (one process: no race).
type savedState struct {
	revs    []rpc.Revision
	records map[string]rpc.PutDeployRecordRequest
}

// savedStateRoutes answer save_revision, list_revisions,
// put_deploy_record and list_deploy_records, checking requests as a
// Machine does (nothing is sealed: no Cluster secret here).
func (fc *Cluster) savedStateRoutes(srv *rpc.Server, m *Machine) {
	HandleMethod(fc, srv, m, rpc.SaveRevision, valid(func(req rpc.SaveRevisionRequest) (rpc.RevisionSaved, error) {
		return fc.saved.save(req), nil
	}))
	HandleMethod(fc, srv, m, rpc.ListRevisions, valid(func(req rpc.ListRevisionsRequest) (rpc.RevisionList, error) {
		return fc.saved.list(req), nil
	}))
	HandleMethod(fc, srv, m, rpc.PutDeployRecord, valid(func(req rpc.PutDeployRecordRequest) (struct{}, error) {
		fc.saved.records[req.DeploymentID] = req
		return struct{}{}, nil
	}))
	HandleMethod(fc, srv, m, rpc.ListDeployRecords, valid(func(req rpc.ListDeployRecordsRequest) (rpc.DeployRecordList, error) {
		return fc.saved.listRecords(req), nil
	}))
}

// valid runs a request's Validate before h, as the Machine does after
// decoding it.
func valid[Req interface{ Validate() error }, Resp any](h func(Req) (Resp, error)) func(Req) (Resp, error) {
	return func(req Req) (Resp, error) {
		if err := req.Validate(); err != nil {
			var none Resp
			return none, err
		}
		return h(req)
	}
}

func (s *savedState) save(req rpc.SaveRevisionRequest) rpc.RevisionSaved {
	ns := deploy.Namespace(req.Project, req.Environment)
	if i := slices.IndexFunc(s.revs, func(r rpc.Revision) bool { return r.ID == req.ID }); i >= 0 {
		return rpc.RevisionSaved{ID: req.ID, Revision: s.revs[i].Revision, Existing: true}
	}
	at := time.Now().UnixMilli()
	for _, r := range s.revs {
		if r.Namespace == ns {
			at = max(at, r.CreatedAt+1)
		}
	}
	s.revs = append(s.revs, rpc.Revision{ID: req.ID, Namespace: ns, Project: req.Project, Environment: req.Environment,
		CreatedAt: at, Operator: req.Operator, Removal: len(req.Compose) == 0, Compose: req.Compose})
	s.number(ns)
	i := slices.IndexFunc(s.revs, func(r rpc.Revision) bool { return r.ID == req.ID })
	return rpc.RevisionSaved{ID: req.ID, Revision: s.revs[i].Revision}
}

// number orders ns's revisions by (created_at, id) and numbers them, as
// the daemon does on read.
func (s *savedState) number(ns string) {
	slices.SortStableFunc(s.revs, func(a, b rpc.Revision) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	n := 0
	for i := range s.revs {
		if s.revs[i].Namespace == ns {
			n++
			s.revs[i].Revision = n
		}
	}
}

func (s *savedState) list(req rpc.ListRevisionsRequest) rpc.RevisionList {
	count := map[string]int{}
	for _, r := range s.revs {
		count[r.Namespace]++
	}
	out := rpc.RevisionList{Revisions: []rpc.Revision{}}
	for _, r := range s.revs {
		if (!req.AllNamespaces && r.Namespace != req.Namespace) ||
			(req.Revision != 0 && r.Revision != req.Revision) || (req.Latest && r.Revision != count[r.Namespace]) {
			continue
		}
		if !req.WithCompose {
			r.Compose = nil
		}
		out.Revisions = append(out.Revisions, r)
	}
	return out
}

func (s *savedState) listRecords(req rpc.ListDeployRecordsRequest) rpc.DeployRecordList {
	out := rpc.DeployRecordList{Records: []rpc.PutDeployRecordRequest{}}
	for _, r := range s.records {
		if req.Namespace == "" || r.Namespace == req.Namespace {
			out.Records = append(out.Records, r)
		}
	}
	slices.SortFunc(out.Records, func(a, b rpc.PutDeployRecordRequest) int {
		return cmp.Or(cmp.Compare(b.StartedAt, a.StartedAt), cmp.Compare(b.Revision, a.Revision), cmp.Compare(b.DeploymentID, a.DeploymentID))
	})
	out.Records = out.Records[:min(len(out.Records), cmp.Or(req.Limit, 200))]
	return out
}

// Revisions are the Cluster's revisions of ns, numbered, oldest first.
func (fc *Cluster) Revisions(ns string) []rpc.Revision {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.saved.list(rpc.ListRevisionsRequest{Namespace: ns}).Revisions
}

// DeployRecordCount is how many deploy records the Cluster holds.
func (fc *Cluster) DeployRecordCount() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.saved.records)
}

// NewSession is the second operator: another operator store (another
// computer) and its own client of the entry, for tests where two
// operators act on one Cluster.
func (fc *Cluster) NewSession() (*operator.Store, *rpc.Client) {
	fc.t.Helper()
	st, err := operator.Open(filepath.Join(fc.t.TempDir(), "operator.db"))
	if err != nil {
		fc.t.Fatal(err)
	}
	fc.t.Cleanup(func() { st.Close() })
	c, err := rpc.DialUnix(fc.peers[0].Address)
	if err != nil {
		fc.t.Fatal(err)
	}
	fc.t.Cleanup(func() { c.Close() })
	return st, c
}
