package server

import (
	"errors"
	"net/http"
	"strconv"
)

func (n *Node) handleSubscribe(w http.ResponseWriter, r *http.Request) {
	var st Statement
	if !n.readBody(w, r, &st) {
		return
	}
	s, err := n.subs.subscribe(r.Context(), st)
	var full errTooManySubs
	if errors.As(err, &full) {
		writeError(w, http.StatusTooManyRequests, "%v", err)
		return
	}
	if err != nil {
		writeError(w, sqlStatus(err), "%v", err)
		return
	}
	n.stream(w, r, s)
}

func (n *Node) handleResubscribe(w http.ResponseWriter, r *http.Request) {
	s := n.subs.get(r.PathValue("id"))
	if s == nil {
		writeError(w, http.StatusNotFound, "subscription %s not found", r.PathValue("id"))
		return
	}
	n.stream(w, r, s)
}

// stream sends the snapshot or the replay after ?from=, then live changes
// until the client goes away or the node stops.
func (n *Node) stream(w http.ResponseWriter, r *http.Request, s *sub) {
	q := r.URL.Query()
	var from *int64
	if f := q.Get("from"); f != "" {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "from must be a change id (non-negative integer), got %q", f)
			return
		}
		from = &v
	}
	skip := q.Get("skip_rows") == "true"
	backlog, l, err := s.attach(r.Context(), from, skip)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	defer s.detach(l)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("corro-query-id", s.id)
	w.Header().Set("corro-query-hash", s.hash)
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	write := func(line []byte) bool {
		if _, err := w.Write(append(line, '\n')); err != nil {
			return false
		}
		return true
	}
	for _, line := range backlog {
		if !write(line) {
			return
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-n.stop:
			return
		case line, ok := <-l.ch:
			if !ok {
				if l.overflow {
					write([]byte(`{"error":"subscriber fell too far behind; resume from the last change id"}`))
				}
				return
			}
			if !write(line) {
				return
			}
			// Coalesce whatever else is ready into one flush.
			for more := true; more; {
				select {
				case line, ok := <-l.ch:
					if !ok {
						more = false
						break
					}
					if !write(line) {
						return
					}
				default:
					more = false
				}
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
