package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// ImportReport is what importing this computer's operator store into
// its Cluster moved: Saved State revisions, deploy records, Volume Runs,
// allocations and removal marks kept before the Cluster kept them. Done
// says the import ran (once per context); moving nothing is a done
// import too.
type ImportReport struct {
	Context   string `json:"context"`
	Revisions int    `json:"revisions"`
	Records   int    `json:"records"`
	// VolumeRuns are the Volume Runs moved (importruns.go).
	VolumeRuns int `json:"volume_runs"`
	// Allocations and Removals are the allocation history rows and the
	// removal marks moved (importmarks.go).
	Allocations int  `json:"allocations"`
	Removals    int  `json:"removals"`
	Done        bool `json:"done"`
	// Already says an earlier import of the context ran: nothing tried.
	Already bool `json:"already,omitempty"`
}

// Moved reports whether the import moved anything.
func (r ImportReport) Moved() bool {
	return r.Revisions > 0 || r.Records > 0 || r.VolumeRuns > 0 || r.Allocations > 0 || r.Removals > 0
}

// String is the sentence the CLI prints once.
func (r ImportReport) String() string {
	return fmt.Sprintf("imported this computer's records of context %s into the Cluster: %d Saved State revision(s), %d deploy record(s), %d Volume Run(s), %d subnet allocation(s), %d removal mark(s)",
		r.Context, r.Revisions, r.Records, r.VolumeRuns, r.Allocations, r.Removals)
}

// ImportLocalState imports the context's revisions, deploy records,
// Volume Runs, allocation history and removal marks from this
// computer's operator store into the Cluster, once: a marker per context
// (one each for the runs and for the allocations and marks, which later
// releases moved) makes later calls answer Already. Each revision is saved
// under an id derived from what it is, and each record under its
// deployment id, so an import interrupted and run again moves nothing
// twice. An entry that keeps no revisions (an older release) is left
// alone and asked again next time; a Session without a context has
// nothing to mark and imports nothing.
func (s *Session) ImportLocalState(ctx context.Context) (ImportReport, error) {
	rep := ImportReport{Context: s.name}
	if s.name == "" {
		return rep, nil
	}
	at, err := s.st.ImportedToCluster(s.name)
	if err != nil {
		return rep, err
	}
	if at.IsZero() {
		if err := s.importSavedState(ctx, &rep); err != nil || !rep.Done {
			return rep, err
		}
	}
	ran, err := s.importVolumeRuns(ctx, &rep)
	if err == nil {
		var marks bool
		marks, err = s.importMarks(ctx, &rep)
		ran = ran || marks
	}
	rep.Done = rep.Done || ran
	rep.Already = !rep.Done && err == nil && !at.IsZero()
	return rep, err
}

// importSavedState imports the revisions and deploy records and marks
// them done; an entry that keeps none leaves rep not Done.
func (s *Session) importSavedState(ctx context.Context, rep *ImportReport) error {
	renumber, err := s.importRevisions(ctx, rep)
	if Unsupported(err) {
		*rep = ImportReport{Context: s.name}
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.importRecords(ctx, renumber, rep); err != nil {
		return err
	}
	rep.Done = true
	return s.st.MarkImportedToCluster(s.name, time.Now())
}

// revisionKey is a local revision: namespace and number.
type revisionKey struct {
	ns  string
	rev int
}

// importRevisions saves every local revision in the Cluster, oldest
// first per namespace: they number after what the Cluster holds, in
// their order here. It answers each one's number there.
func (s *Session) importRevisions(ctx context.Context, rep *ImportReport) (map[revisionKey]int, error) {
	states, err := s.st.States(s.name)
	if err != nil {
		return nil, err
	}
	renumber := map[revisionKey]int{}
	for _, meta := range states {
		st, err := s.st.State(s.name, meta.Project, meta.Environment, meta.Revision)
		if err != nil {
			return nil, err
		}
		var out rpc.RevisionSaved
		err = rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.SaveRevision, rpc.SaveRevisionRequest{ID: importedID(s.name, st), Project: st.Project,
			Environment: st.Environment, Compose: st.Compose, Operator: s.Operator().History(),
			Source: "import:" + s.name, SourceRevision: st.Revision}, &out)
		if err != nil {
			return nil, fmt.Errorf("import revision %d of %s: %w", st.Revision, deploy.Namespace(st.Project, st.Environment), err)
		}
		renumber[revisionKey{deploy.Namespace(st.Project, st.Environment), st.Revision}] = out.Revision
		if !out.Existing {
			rep.Revisions++
		}
	}
	return renumber, nil
}

// importedID names a local revision the same on every import.
func importedID(ctxName string, st operator.SavedState) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%d\x00%d", ctxName, st.Project, st.Environment, st.Revision, st.CreatedAt.Unix()))
	return "imp-" + hex.EncodeToString(sum[:12])
}

// importRecords writes the local deploy records the Cluster lacks, their
// revision renumbered as the Cluster numbers it.
func (s *Session) importRecords(ctx context.Context, renumber map[revisionKey]int, rep *ImportReport) error {
	rows, err := s.st.Deploys(s.name, operator.KeepDeploys)
	if err != nil {
		return err
	}
	var have rpc.DeployRecordList
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ListDeployRecords, rpc.ListDeployRecordsRequest{Limit: rpc.HistoryMaxLimit}, &have); err != nil {
		return fmt.Errorf("import deploy records: %w", err)
	}
	there := map[string]bool{}
	for _, r := range have.Records {
		there[r.DeploymentID] = true
	}
	for _, r := range rows {
		if there[r.DeploymentID] {
			continue
		}
		req, err := importedRecord(r, renumber)
		if err != nil {
			return err
		}
		// History first: a record put makes the next import skip it, and
		// the entry's id is stable, so writing it again changes nothing.
		if err := s.importHistory(ctx, r, req); err != nil {
			return err
		}
		if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.PutDeployRecord, req, nil); err != nil {
			return fmt.Errorf("import deploy record %s: %w", r.DeploymentID, err)
		}
		rep.Records++
	}
	return nil
}

// importedRecord is a local record as the Cluster keeps it, its
// revision the Cluster's number for the same revision.
func importedRecord(r operator.DeployRow, renumber map[revisionKey]int) (rpc.PutDeployRecordRequest, error) {
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return rpc.PutDeployRecordRequest{}, fmt.Errorf("import deploy record %s: %w", r.DeploymentID, err)
	}
	rev, _ := body["revision"].(float64)
	n, ok := renumber[revisionKey{r.Namespace, int(rev)}]
	if !ok {
		n = int(rev)
	}
	raw := r.Body
	if n != int(rev) {
		body["revision"] = n
		raw, _ = json.Marshal(body)
	}
	return rpc.PutDeployRecordRequest{DeploymentID: r.DeploymentID, Namespace: r.Namespace, Revision: n,
		StartedAt: max(r.StartedAt.UnixMilli(), 1), UpdatedAt: r.UpdatedAt.UnixMilli(), Record: raw}, nil
}
