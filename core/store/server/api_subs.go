package server

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// uuidRe is the textual UUID form Corrosion accepts as a subscription id.
var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

// canonicalUUID accepts a UUID with or without hyphens, in either case,
// and returns the lowercase hyphenated form subscription ids are kept in.
func canonicalUUID(s string) (string, bool) {
	if !uuidRe.MatchString(s) {
		return "", false
	}
	h := strings.ToLower(strings.ReplaceAll(s, "-", ""))
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// subParams are Corrosion's ?from= and ?skip_rows= on both subscription
// routes.
type subParams struct {
	from     *int64
	skipRows bool
}

func parseSubParams(r *http.Request) (subParams, error) {
	var p subParams
	q := r.URL.Query()
	if f := q.Get("from"); f != "" {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return p, errors.New("from must be a change id (non-negative integer), got " + strconv.Quote(f))
		}
		p.from = &v
	}
	if s := q.Get("skip_rows"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return p, errors.New("skip_rows must be true or false, got " + strconv.Quote(s))
		}
		p.skipRows = v
	}
	return p, nil
}

func (n *Node) handleSubscribe(w http.ResponseWriter, r *http.Request) {
	p, err := parseSubParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var st Statement
	if !n.readBody(w, r, &st) {
		return
	}
	// Corrosion resumes only a subscription that exists: ?from= on a new
	// query is a client error, not a fresh subscription.
	s, err := n.subs.subscribe(r.Context(), st, p.from == nil)
	var full errTooManySubs
	switch {
	case errors.Is(err, errFromWithoutSub):
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	case errors.As(err, &full):
		writeError(w, http.StatusTooManyRequests, "%v", err)
		return
	case err != nil:
		writeError(w, sqlStatus(err), "%v", err)
		return
	}
	n.stream(w, r, s, p)
}

func (n *Node) handleResubscribe(w http.ResponseWriter, r *http.Request) {
	id, ok := canonicalUUID(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusBadRequest, "invalid subscription id %q: not a UUID", r.PathValue("id"))
		return
	}
	p, err := parseSubParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s := n.subs.get(id)
	if s == nil {
		writeError(w, http.StatusNotFound, "could not find subscription with id %s", id)
		return
	}
	n.stream(w, r, s, p)
}

// stream sends what Corrosion sends before live changes — the snapshot
// (columns, rows, eoq) when from is absent or 0 and rows are wanted,
// nothing with skip_rows, only the change events after from otherwise —
// then live changes until the client goes away or the node stops.
func (n *Node) stream(w http.ResponseWriter, r *http.Request, s *sub, p subParams) {
	backlog, l, err := s.attach(r.Context(), p.from, p.skipRows)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("corro-query-id", s.id)
	w.Header().Set("corro-query-hash", s.hash)
	w.WriteHeader(http.StatusOK)
	if err != nil {
		// Corrosion reports a failed catch-up as an error event on a 200
		// stream and ends it.
		_, _ = w.Write(append(errorLine(err), '\n'))
		return
	}
	defer s.detach(l)
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
				// Dropped (too far behind, or the subscription failed):
				// end the stream like Corrosion does, so the client
				// resumes from its last change id.
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
