package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

// execResult is Corrosion's untagged ExecResult: {"rows_affected","time"}
// or {"error"}.
type execResult struct {
	RowsAffected *int64   `json:"rows_affected,omitempty"`
	Time         *float64 `json:"time,omitempty"`
	Error        string   `json:"error,omitempty"`
}

type execResponse struct {
	Results []execResult `json:"results"`
	Time    float64      `json:"time"`
	Version *int64       `json:"version"`
	ActorID string       `json:"actor_id,omitempty"`
}

func (n *Node) handleTransactions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var stmts []Statement
	if !n.readBody(w, r, &stmts) {
		return
	}
	if len(stmts) == 0 {
		n.execFailed(w, http.StatusBadRequest, "at least 1 statement is required")
		return
	}
	ctx, cancel, err := withTimeout(r, time.Minute)
	if err != nil {
		n.execFailed(w, http.StatusBadRequest, err.Error())
		return
	}
	defer cancel()
	args := make([]crdt.Stmt, len(stmts))
	// The engine's authorizer refuses DDL, ATTACH, PRAGMA and the store's
	// metadata: schema comes only from schema files.
	for i, s := range stmts {
		args[i] = crdt.Stmt{Query: s.Query, Args: s.Args()}
	}
	results, version, err := n.eng.Exec(ctx, args)
	if err != nil {
		// Corrosion answers every failed transaction, a refused or
		// malformed statement included, 500 with an ExecResponse; the
		// message is the SQLite (or authorizer) error itself.
		var se *crdt.StmtError
		if errors.As(err, &se) {
			err = se.Err
		}
		n.execFailed(w, http.StatusInternalServerError, err.Error())
		return
	}
	resp := execResponse{Time: time.Since(start).Seconds(), Version: version, ActorID: n.eng.Site()}
	for _, res := range results {
		ra, t := res.RowsAffected, res.Time
		resp.Results = append(resp.Results, execResult{RowsAffected: &ra, Time: &t})
	}
	writeJSON(w, http.StatusOK, resp)
}

// execFailed answers Corrosion's failed ExecResponse: one error result,
// time 0, no version, this node's actor id.
func (n *Node) execFailed(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, execResponse{Results: []execResult{{Error: msg}}, ActorID: n.eng.Site()})
}

func (n *Node) handleQueries(w http.ResponseWriter, r *http.Request) {
	var st Statement
	if !n.readBody(w, r, &st) {
		return
	}
	ctx, cancel, err := withTimeout(r, time.Minute)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	defer cancel()
	start := time.Now()
	rows, err := n.eng.Query(ctx, st.Query, st.Args()...)
	if err != nil {
		writeError(w, sqlStatus(err), "query: %v", err)
		return
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "query columns: %v", err)
		return
	}
	// A write statement fails on the read-only connection at its first
	// step; surface that before committing to a 200 stream.
	has := rows.Next()
	if !has && rows.Err() != nil {
		writeError(w, sqlStatus(rows.Err()), "query: %v", rows.Err())
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	line := func(v any) { _, _ = w.Write(append(wireJSON(v), '\n')) }
	line(map[string]any{"columns": cols})
	var i int64
	for ; has; has = rows.Next() {
		i++
		dest := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for j := range dest {
			ptrs[j] = &dest[j]
		}
		if err := rows.Scan(ptrs...); err != nil {
			line(map[string]string{"error": err.Error()})
			return
		}
		for j := range dest {
			dest[j] = renderValue(dest[j])
		}
		line(map[string]any{"row": []any{i, dest}})
	}
	if err := rows.Err(); err != nil {
		line(map[string]string{"error": err.Error()})
		return
	}
	_, _ = w.Write(append(eoqLine(time.Since(start), nil), '\n'))
}
