package store

import (
	"context"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// History is the operator history table, one row per operation keyed by
// the id the operation minted (HistoryBody).
func History(c *sdkstore.Client) sdkstore.Table[HistoryBody] {
	return sdkstore.NewTable[HistoryBody](c, "history", "id")
}

// HistoryBody is one operation an operator ran against the Cluster: what
// (Kind), where (Namespace, Services, Revision), who (Operator), when
// (StartedAt, FinishedAt, unix milliseconds) and how it ended (Outcome,
// Detail). A frozen format like the other bodies: fields are only added.
type HistoryBody struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace,omitempty"`
	Services  []string `json:"services,omitempty"`
	Revision  int      `json:"revision,omitempty"`
	// Operator names who acted: the operator context's name and the SSH
	// key fingerprint it reached the entry with.
	Operator   HistoryOperator `json:"operator"`
	StartedAt  int64           `json:"started_at"`
	FinishedAt int64           `json:"finished_at,omitempty"`
	// Outcome is running, completed, unchanged, partial, failed or
	// cancelled.
	Outcome string `json:"outcome"`
	// Detail is one short line: the operation's why, or its error.
	Detail string `json:"detail,omitempty"`
}

// HistoryOperator is who ran an operation (core/operator.Operator's JSON).
type HistoryOperator struct {
	Name           string `json:"name"`
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// HistoryNewest returns at most limit history rows, newest started first
// (then by id), of namespace ns and kind ("" for any): the store filters
// and orders, so a long history is not read whole.
func HistoryNewest(ctx context.Context, c *sdkstore.Client, ns, kind string, limit int) ([]sdkstore.Row[HistoryBody], error) {
	return History(c).Where(ctx, `WHERE (? = '' OR json_extract(body, '$.namespace') = ?) AND (? = '' OR json_extract(body, '$.kind') = ?)
		ORDER BY json_extract(body, '$.started_at') DESC, id DESC LIMIT ?`, ns, ns, kind, kind, limit)
}
