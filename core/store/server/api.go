package server

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ployz/ployz/core/store/gossip"
)

// newAPIServer serves Corrosion's HTTP API subset over HTTP/1.1 and h2c
// (HTTP/2 with prior knowledge, as Uncloud's client speaks). The unix
// socket's server takes no token: its listener already hung up on every
// peer but root and the store's own uid.
func newAPIServer(n *Node, tokenless bool) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/transactions", n.handleTransactions)
	mux.HandleFunc("POST /v1/queries", n.handleQueries)
	mux.HandleFunc("POST /v1/subscriptions", n.handleSubscribe)
	mux.HandleFunc("GET /v1/subscriptions/{id}", n.handleResubscribe)
	mux.HandleFunc("GET /v1/health", n.handleHealth)
	mux.HandleFunc("GET /v1/membership", n.handleMembership)
	mux.HandleFunc("POST /v1/updates/{table}", n.handleUpdates)
	mux.HandleFunc("POST /v1/table_stats", n.handleTableStats)
	// HTTP/2 without TLS (prior knowledge) beside HTTP/1.1, from net/http
	// itself (x/net's h2c package is deprecated for this).
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           n.auth(mux, tokenless),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(wireJSON(v), '\n'))
}

// wireJSON encodes an API answer the way Corrosion's serde_json does:
// '<', '>' and '&' stay as they are (encoding/json would escape them,
// changing JSON text a client stored).
func wireJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		out, _ := json.Marshal(map[string]string{"error": "encode answer: " + err.Error()})
		return out
	}
	// Clipped: one line goes to many listeners, each appending its own
	// newline, and an append into shared spare capacity would be a race.
	return slices.Clip(bytes.TrimSuffix(b.Bytes(), []byte{'\n'}))
}

func writeError(w http.ResponseWriter, status int, format string, a ...any) {
	writeJSON(w, status, map[string]string{"error": fmt.Sprintf(format, a...)})
}

// auth checks the bearer token; Start has refused a TCP API without a
// token unless the config says NoAuth (tests).
func (n *Node) auth(next http.Handler, tokenless bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !n.cfg.NoAuth && !tokenless {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(n.cfg.Token)) != 1 {
				writeError(w, http.StatusUnauthorized, "unauthorized: missing or wrong bearer token")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readBody decodes a JSON body under the size cap, answering the error
// itself; it returns false when the handler should stop.
func (n *Node) readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, n.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		writeError(w, http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", n.cfg.MaxBodyBytes)
		return false
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "read request body: %v", err)
		return false
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON body: %v", err)
		return false
	}
	return true
}

// withTimeout applies Corrosion's ?timeout=SECONDS.
func withTimeout(r *http.Request, def time.Duration) (context.Context, context.CancelFunc, error) {
	d := def
	if t := r.URL.Query().Get("timeout"); t != "" {
		secs, err := strconv.ParseFloat(t, 64)
		if err != nil || secs <= 0 {
			return nil, nil, fmt.Errorf("timeout must be a positive number of seconds, got %q", t)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return ctx, cancel, nil
}

// sqlStatus maps a SQLite failure caused by the request (syntax, unknown
// table or column, constraint) to 400 and anything else to 500.
func sqlStatus(err error) int {
	msg := err.Error()
	for _, s := range []string{"SQL logic error", "syntax error", "no such", "constraint failed", "readonly", "read-only", "datatype mismatch", "not an error", "incomplete input", "too many", "not enough", "reserved", "schema", "not allowed"} {
		if strings.Contains(msg, s) {
			return http.StatusBadRequest
		}
	}
	return http.StatusInternalServerError
}

// healthResponse is Corrosion's HealthResponse::Response, in its field
// order, plus this store's actor id and version vector.
type healthResponse struct {
	Gaps      int64            `json:"gaps"`
	Members   int64            `json:"members"`
	P99Lag    float64          `json:"p99_lag"`
	QueueSize uint64           `json:"queue_size"`
	ActorID   string           `json:"actor_id"`
	Vector    map[string]int64 `json:"vector"`
}

// healthQuery is Corrosion's HealthQuery; an unparsable value is ignored,
// as an absent one.
type healthQuery struct {
	gaps, maxQueue, queueSize *int64
	p99Lag                    *float64
	failureStatus             int
}

func parseHealthQuery(r *http.Request) healthQuery {
	q := r.URL.Query()
	h := healthQuery{failureStatus: http.StatusServiceUnavailable}
	intOf := func(name string) *int64 {
		if v, err := strconv.ParseInt(q.Get(name), 10, 64); err == nil {
			return &v
		}
		return nil
	}
	h.gaps, h.maxQueue, h.queueSize = intOf("gaps"), intOf("max_queue"), intOf("queue_size")
	if v, err := strconv.ParseFloat(q.Get("p99_lag"), 64); err == nil {
		h.p99Lag = &v
	}
	if v, err := strconv.Atoi(q.Get("failure_status")); err == nil && v >= 100 && v < 1000 {
		h.failureStatus = v
	}
	return h
}

// unhealthy applies Corrosion's rule: too many gaps, or a queue over
// max_queue, or a p99 lag over p99_lag unless the queue is within
// queue_size (queue_size only qualifies the lag threshold).
func (h healthQuery) unhealthy(gaps, queue int64, lag float64) bool {
	over := func(limit *int64, v int64) bool { return limit != nil && v > *limit }
	return over(h.gaps, gaps) || over(h.maxQueue, queue) ||
		(h.p99Lag != nil && lag > *h.p99Lag && (h.queueSize == nil || queue > *h.queueSize))
}

// handleMembership answers this node's SWIM view of the other members
// (store.Client.Membership): a Ployz addition to Corrosion's API, so that
// Internal DNS and the ingress can leave out Machines this one holds
// down without reaching the root-only admin socket. A reader that gets
// 404 (a store without it) has no membership view.
// maxMembershipWait bounds how long GET /v1/membership?wait= holds.
const maxMembershipWait = time.Minute

// handleMembership answers the SWIM view. With wait=<duration> and
// down=<the sorted, comma-separated sites the reader last saw down> it
// first holds the request until the set of down sites differs from that
// or wait passes: a reader following the view asks once per change (or
// per wait) instead of every second. "waits": true tells it so; a store
// without this answers at once and without the field, and the reader
// keeps polling.
func (n *Node) handleMembership(w http.ResponseWriter, r *http.Request) {
	type member struct {
		Site  string `json:"site"`
		State string `json:"state"`
	}
	out := struct {
		Members []member `json:"members"`
		Waits   bool     `json:"waits"`
	}{Members: []member{}, Waits: true}
	if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && wait > 0 {
		n.waitMembership(r.Context(), r.URL.Query().Get("down"), min(wait, maxMembershipWait))
	}
	for _, m := range n.Members() {
		out.Members = append(out.Members, member{Site: m.Name, State: m.State})
	}
	writeJSON(w, http.StatusOK, out)
}

// waitMembership returns once the down sites differ from down, after
// wait, or when ctx ends or the node stops. It sleeps until gossip
// reports a member going up or down (the only change to the down set)
// rather than looking every 500 ms: each reader held (DNS, the ingress)
// woke the store twice a second at rest.
func (n *Node) waitMembership(ctx context.Context, down string, wait time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		changed := n.upDownChanged() // before the read: a change after it closes this one
		if downKey(n.Members()) != down {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		case <-deadline.C:
			return
		case <-changed:
		}
	}
}

// downKey is the sorted, comma-separated sites held down, as readers
// name them in GET /v1/membership?down=.
func downKey(ms []gossip.MemberState) string {
	var down []string
	for _, m := range ms {
		if m.State == "down" {
			down = append(down, m.Name)
		}
	}
	slices.Sort(down)
	return strings.Join(down, ",")
}

func (n *Node) handleHealth(w http.ResponseWriter, r *http.Request) {
	book := n.eng.Book()
	var members int64
	for _, m := range n.Members() {
		if m.State == "up" || m.State == "suspect" {
			members++
		}
	}
	resp := healthResponse{Gaps: book.Gaps(), Members: members, QueueSize: uint64(len(n.applyCh)),
		ActorID: n.eng.Site(), Vector: book.Vector()}
	status := http.StatusOK
	if h := parseHealthQuery(r); h.unhealthy(resp.Gaps, int64(resp.QueueSize), resp.P99Lag) {
		status = h.failureStatus
	}
	writeJSON(w, status, map[string]any{"response": resp})
}
