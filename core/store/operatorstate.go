package store

import (
	"context"
	"encoding/json"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Revisions is the Saved State revisions table (RevisionBody).
func Revisions(c *sdkstore.Client) sdkstore.Table[RevisionBody] {
	return sdkstore.NewTable[RevisionBody](c, "revisions", "id")
}

// DeployRecords is the deploy records table, keyed by deployment id.
func DeployRecords(c *sdkstore.Client) sdkstore.Table[DeployRecordBody] {
	return sdkstore.NewTable[DeployRecordBody](c, "deploy_records", "id")
}

// ListNamespace returns the rows of t whose body's namespace is ns,
// ordered by key.
func ListNamespace[B any](ctx context.Context, t sdkstore.Table[B], ns string) ([]sdkstore.Row[B], error) {
	return t.Where(ctx, "WHERE json_extract(body, '$.namespace') = ? ORDER BY "+t.Key(), ns)
}

// RevisionBody is one Saved State revision of a project's environment.
// Its number is not stored: revisions of a namespace are numbered from 1
// in (created_at, id) order on read, so two operators deploying at once
// both keep their revision (docs/formats.md).
type RevisionBody struct {
	Namespace   string `json:"namespace"`
	Project     string `json:"project"`
	Environment string `json:"environment"`
	// Compose is the compose file sealed with the Cluster key
	// ("enc:v1:…", Sealer with SavedStatePurpose); "" is a removal's
	// empty revision.
	Compose string `json:"compose,omitempty"`
	// CreatedAt (unix ms) is stamped by the entry, above every revision
	// of the namespace it has seen (an imported revision's too).
	CreatedAt int64           `json:"created_at"`
	Operator  HistoryOperator `json:"operator"`
	// Source names where an imported revision came from
	// ("import:<context>") and SourceRevision its number there.
	Source         string `json:"source,omitempty"`
	SourceRevision int    `json:"source_revision,omitempty"`
}

// DeployRecordBody is one Deploy's record (core/deploy.Record's JSON,
// kept opaque here) with what readers filter on.
type DeployRecordBody struct {
	Namespace string          `json:"namespace"`
	Revision  int             `json:"revision,omitempty"`
	StartedAt int64           `json:"started_at"` // unix ms
	UpdatedAt int64           `json:"updated_at"` // unix ms
	Record    json.RawMessage `json:"record"`
}
