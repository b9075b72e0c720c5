package rpc

import (
	"encoding/json"

	"github.com/ployz/ployz/core/store"
)

// Saved State revisions and deploy records in the Cluster: the operator
// library saves each revision and writes each Deploy's record through
// its entry, which seals compose files with the Cluster key (only
// Machines hold it), so a teammate's `ployz rollback` finds them.
const (
	CmdSaveRevision      = "save_revision"
	CapSaveRevision      = "ployz.operator.save_revision.v1"
	CmdListRevisions     = "list_revisions"
	CapListRevisions     = "ployz.operator.list_revisions.v1"
	CmdPutDeployRecord   = "put_deploy_record"
	CapPutDeployRecord   = "ployz.operator.put_deploy_record.v1"
	CmdListDeployRecords = "list_deploy_records"
	CapListDeployRecords = "ployz.operator.list_deploy_records.v1"
)

// maxComposeBytes bounds one revision's compose file.
const maxComposeBytes = 1 << 20

// SaveRevisionRequest saves one revision of Project's Environment. An
// empty Compose is a removal's revision. Source and SourceRevision are
// set by an import only. The entry stamps every revision's time, an
// imported one's too: a revision saved now numbers after every revision
// the Cluster holds, so no number it answered before moves.
type SaveRevisionRequest struct {
	ID             string                `json:"id"`
	Project        string                `json:"project"`
	Environment    string                `json:"environment"`
	Compose        []byte                `json:"compose,omitempty"`
	Operator       store.HistoryOperator `json:"operator"`
	Source         string                `json:"source,omitempty"`
	SourceRevision int                   `json:"source_revision,omitempty"`
}

// RevisionSaved answers save_revision: the revision's number as the entry
// numbers it now.
type RevisionSaved struct {
	ID       string `json:"id"`
	Revision int    `json:"revision"`
	// Existing says the id was saved before: nothing was written.
	Existing bool `json:"existing,omitempty"`
}

// ListRevisionsRequest asks for a namespace's revisions (all, or one by
// number; 0 with Latest: the newest), oldest first. Compose files are
// answered only with WithCompose. AllNamespaces (with Latest, and no
// Namespace) asks for the newest revision of every namespace, by
// namespace: what `ps` and `ls` declare.
type ListRevisionsRequest struct {
	Namespace     string `json:"namespace,omitempty"`
	Revision      int    `json:"revision,omitempty"`
	Latest        bool   `json:"latest,omitempty"`
	WithCompose   bool   `json:"with_compose,omitempty"`
	AllNamespaces bool   `json:"all_namespaces,omitempty"`
}

// Revision is one numbered revision.
type Revision struct {
	ID          string                `json:"id"`
	Namespace   string                `json:"namespace"`
	Project     string                `json:"project"`
	Environment string                `json:"environment"`
	Revision    int                   `json:"revision"`
	CreatedAt   int64                 `json:"created_at"`
	Operator    store.HistoryOperator `json:"operator"`
	Removal     bool                  `json:"removal,omitempty"`
	Compose     []byte                `json:"compose,omitempty"`
}

// RevisionList answers list_revisions.
type RevisionList struct {
	Revisions []Revision `json:"revisions"`
}

// PutDeployRecordRequest writes (or rewrites) one Deploy's record.
type PutDeployRecordRequest struct {
	DeploymentID string          `json:"deployment_id"`
	Namespace    string          `json:"namespace"`
	Revision     int             `json:"revision,omitempty"`
	StartedAt    int64           `json:"started_at"`
	UpdatedAt    int64           `json:"updated_at"`
	Record       json.RawMessage `json:"record"`
}

// ListDeployRecordsRequest asks for the newest Limit records (0: 200),
// of Namespace ("" for all), newest first.
type ListDeployRecordsRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Limit     int    `json:"limit,omitempty"`
}

// DeployRecordList answers list_deploy_records, newest first.
type DeployRecordList struct {
	Records []PutDeployRecordRequest `json:"records"`
}

// Validate refuses a malformed request, naming the field.
func (r SaveRevisionRequest) Validate() error {
	if !isID(r.ID) {
		return InvalidField("id", "%q: want 1 to %d letters, digits, '-' or '_'", r.ID, historyMaxID)
	}
	if err := validProjectEnv(r.Project, r.Environment); err != nil {
		return err
	}
	switch {
	case len(r.Compose) > maxComposeBytes:
		return InvalidField("compose", "%d bytes: at most %d", len(r.Compose), maxComposeBytes)
	case !validOperator(r.Operator):
		return InvalidField("operator.name", "%q: want 1 to 128 printable characters", r.Operator.Name)
	case r.SourceRevision < 0:
		return InvalidField("source_revision", "%d: a revision is a number from 1", r.SourceRevision)
	}
	return nil
}

// Validate refuses a malformed request, naming the field.
func (r ListRevisionsRequest) Validate() error {
	switch {
	case r.AllNamespaces && r.Namespace != "":
		return InvalidField("namespace", "%q: all_namespaces asks for every namespace", r.Namespace)
	case r.AllNamespaces && (!r.Latest || r.Revision != 0):
		return InvalidField("all_namespaces", "answers each namespace's newest revision only: set latest, and no revision")
	case r.AllNamespaces:
		return nil
	case r.Namespace == "" || len(r.Namespace) > 128:
		return InvalidField("namespace", "%q: want a namespace", r.Namespace)
	case r.Revision < 0:
		return InvalidField("revision", "%d: a revision is a number from 1", r.Revision)
	case r.Revision > 0 && r.Latest:
		return InvalidField("latest", "asks for the newest revision; revision %d names one", r.Revision)
	}
	return nil
}

// Validate refuses a malformed request, naming the field.
func (r PutDeployRecordRequest) Validate() error {
	switch {
	case !isID(r.DeploymentID):
		return InvalidField("deployment_id", "%q: want 1 to %d letters, digits, '-' or '_'", r.DeploymentID, historyMaxID)
	case r.Namespace == "" || len(r.Namespace) > 128:
		return InvalidField("namespace", "%q: want a namespace", r.Namespace)
	case r.Revision < 0:
		return InvalidField("revision", "%d: a revision is a number from 1", r.Revision)
	case r.StartedAt <= 0:
		return InvalidField("started_at", "%d: want unix milliseconds", r.StartedAt)
	case len(r.Record) == 0 || r.Record[0] != '{' || len(r.Record) > maxComposeBytes:
		return InvalidField("record", "want a JSON object of at most %d bytes", maxComposeBytes)
	}
	return nil
}

// Validate refuses a limit out of range, naming the field.
func (r ListDeployRecordsRequest) Validate() error {
	if r.Limit < 0 || r.Limit > HistoryMaxLimit {
		return InvalidField("limit", "%d: want 1 to %d (0: 200)", r.Limit, HistoryMaxLimit)
	}
	return nil
}
