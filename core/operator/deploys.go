package operator

import (
	"fmt"
	"time"
)

// DeployRow is one Deploy's record as the deploying CLI last wrote it.
// Body is the record's JSON (core/deploy.Record); the store keeps it
// opaque so its format is owned, pinned and read in one place.
type DeployRow struct {
	Context      string
	DeploymentID string
	Namespace    string
	StartedAt    time.Time
	UpdatedAt    time.Time
	Body         []byte
}

const deploysSchema = `
CREATE TABLE IF NOT EXISTS deploys (
  context       TEXT NOT NULL,
  deployment_id TEXT NOT NULL,
  namespace     TEXT NOT NULL,
  started_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  body          BLOB NOT NULL,
  PRIMARY KEY (context, deployment_id)
);
CREATE INDEX IF NOT EXISTS deploys_started ON deploys(context, started_at);
`

// KeepDeploys is how many records a context keeps; older ones are
// dropped when a Deploy starts.
const KeepDeploys = 200

func (s *Store) ensureDeploys() error { return s.ensureSchema("deploys", deploysSchema) }

// SaveDeploy writes (or rewrites) a Deploy's record; the first write of a
// Deploy drops the context's records beyond KeepDeploys.
func (s *Store) SaveDeploy(r DeployRow) error {
	if err := s.ensureDeploys(); err != nil {
		return err
	}
	res, err := s.db.Exec(`UPDATE deploys SET namespace = ?, updated_at = ?, body = ? WHERE context = ? AND deployment_id = ?`,
		r.Namespace, r.UpdatedAt.UTC().Format(time.RFC3339Nano), r.Body, r.Context, r.DeploymentID)
	if err != nil {
		return fmt.Errorf("record deploy %s: %w", r.DeploymentID, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	if _, err := s.db.Exec(`INSERT INTO deploys(context, deployment_id, namespace, started_at, updated_at, body) VALUES(?, ?, ?, ?, ?, ?)`,
		r.Context, r.DeploymentID, r.Namespace, r.StartedAt.UTC().Format(time.RFC3339Nano), r.UpdatedAt.UTC().Format(time.RFC3339Nano), r.Body); err != nil {
		return fmt.Errorf("record deploy %s: %w", r.DeploymentID, err)
	}
	if _, err := s.db.Exec(`DELETE FROM deploys WHERE context = ? AND deployment_id NOT IN
		(SELECT deployment_id FROM deploys WHERE context = ? ORDER BY started_at DESC LIMIT ?)`, r.Context, r.Context, KeepDeploys); err != nil {
		return fmt.Errorf("trim deploy records: %w", err)
	}
	return nil
}

// Deploys returns a context's newest limit Deploy records, newest first.
func (s *Store) Deploys(context string, limit int) ([]DeployRow, error) {
	if err := s.ensureDeploys(); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(`SELECT deployment_id, namespace, started_at, updated_at, body FROM deploys WHERE context = ? ORDER BY started_at DESC LIMIT ?`, context, limit)
	if err != nil {
		return nil, fmt.Errorf("deploy records: %w", err)
	}
	defer rows.Close()
	var out []DeployRow
	for rows.Next() {
		r := DeployRow{Context: context}
		var started, updated string
		if err := rows.Scan(&r.DeploymentID, &r.Namespace, &started, &updated, &r.Body); err != nil {
			return nil, fmt.Errorf("deploy records: %w", err)
		}
		r.StartedAt, _ = time.Parse(time.RFC3339Nano, started)
		r.UpdatedAt, _ = time.Parse(time.RFC3339Nano, updated)
		out = append(out, r)
	}
	return out, rows.Err()
}
