package server

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/ployz/ployz/core/store/crdt"
)

// updateHub fans per-table row notifications out to /v1/updates streams.
type updateHub struct {
	mu        sync.Mutex
	listeners map[string]map[chan []byte]bool // table -> streams
}

// publish turns a commit into one notification per touched row: "delete"
// when the row's causal length is even, else "update" (inserts included,
// as in Corrosion). Merged changes that lost to local state still notify;
// a reader re-reads the row either way.
func (h *updateHub) publish(c crdt.Commit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.listeners) == 0 {
		return
	}
	seen := map[[2]string]bool{}
	for _, cs := range c.Changesets {
		for _, ch := range cs.Changes {
			ls := h.listeners[ch.Table]
			k := [2]string{ch.Table, ch.PK}
			if len(ls) == 0 || seen[k] {
				continue
			}
			seen[k] = true
			kind := "update"
			if ch.CL%2 == 0 {
				kind = "delete"
			}
			line := wireJSON(map[string]any{"notify": []any{kind, json.RawMessage(ch.PK)}})
			for l := range ls {
				select {
				case l <- line:
				default: // too slow: cut off, as Corrosion does
					close(l)
					delete(ls, l)
				}
			}
		}
	}
}

func (h *updateHub) add(table string) chan []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listeners == nil {
		h.listeners = map[string]map[chan []byte]bool{}
	}
	if h.listeners[table] == nil {
		h.listeners[table] = map[chan []byte]bool{}
	}
	l := make(chan []byte, listenerBuffer)
	h.listeners[table][l] = true
	return l
}

func (h *updateHub) remove(table string, l chan []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listeners[table][l] {
		delete(h.listeners[table], l)
		close(l)
	}
}

// handleUpdates streams {"notify":[kind,[pk...]]} for one table.
func (n *Node) handleUpdates(w http.ResponseWriter, r *http.Request) {
	table := r.PathValue("table")
	if n.eng.Schema().Tables[table] == nil {
		writeError(w, http.StatusNotFound, "table %s not found", table)
		return
	}
	l := n.updates.add(table)
	defer n.updates.remove(table, l)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-n.stop:
			return
		case line, ok := <-l:
			if !ok {
				return
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}

// handleTableStats answers {"tables":[...]} with the total row count and
// the names that are not replicated tables.
func (n *Node) handleTableStats(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Tables []string `json:"tables"`
	}
	if !n.readBody(w, r, &req) {
		return
	}
	schema := n.eng.Schema()
	var total int64
	invalid := []string{}
	for _, t := range req.Tables {
		if schema.Tables[t] == nil {
			invalid = append(invalid, t)
			continue
		}
		var c int64
		if err := n.eng.ReadDB().QueryRowContext(r.Context(), `SELECT count(*) FROM "`+t+`"`).Scan(&c); err != nil {
			writeError(w, http.StatusInternalServerError, "count rows of %s: %v", t, err)
			return
		}
		total += c
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_row_count": total, "invalid_tables": invalid})
}
