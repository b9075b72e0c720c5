package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Action is one scale, restart, stop or start this dashboard ran, with its output.
type Action struct {
	ID        int        `json:"id"`
	Kind      string     `json:"kind"`
	Namespace string     `json:"namespace"`
	Service   string     `json:"service"`
	Replicas  *int       `json:"replicas,omitempty"`
	Started   time.Time  `json:"started"`
	Finished  *time.Time `json:"finished,omitempty"`
	// Status is running, completed or failed (a partial deploy is failed:
	// Error says which steps).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	Output string `json:"output"`
}

type action struct {
	mu  sync.Mutex
	a   Action
	out bytes.Buffer
}

func (a *action) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.out.Write(p)
}

func (a *action) snapshot() Action {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.a
	c.Output = a.out.String()
	return c
}

// actionLog is every action of this run, newest first.
func (s *Server) actionLog() []Action {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Action, 0, len(s.actions))
	for i := len(s.actions) - 1; i >= 0; i-- {
		out = append(out, s.actions[i].snapshot())
	}
	return out
}

// actionRequest is the body of POST /api/scale and /api/restart.
type actionRequest struct {
	Namespace string           `json:"namespace"`
	Service   string           `json:"service"`
	Replicas  *json.RawMessage `json:"replicas,omitempty"`
}

// decodeAction reads and checks an action body; the Service must be one
// the Services view lists and, when saved, one a Saved State declares
// (scale and restart deploy it).
func (s *Server) decodeAction(r *http.Request, saved bool) (actionRequest, error) {
	var req actionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, &FieldError{Field: "body", Msg: "want a JSON object {namespace, service[, replicas]}: " + err.Error()}
	}
	if req.Namespace == "" {
		return req, &FieldError{Field: "namespace", Msg: "required"}
	}
	if req.Service == "" {
		return req, &FieldError{Field: "service", Msg: "required"}
	}
	svcs, err := s.src.Services(r.Context())
	if err != nil {
		return req, err
	}
	for _, row := range svcs.Services {
		if row.Namespace == req.Namespace && row.Service == req.Service {
			if saved && !row.Scalable {
				return req, &FieldError{Field: "service", Msg: fmt.Sprintf("no Saved State declares %s in %s; deploy it with `ployz deploy` first", req.Service, req.Namespace)}
			}
			return req, nil
		}
	}
	return req, &FieldError{Field: "service", Msg: fmt.Sprintf("no Service %s in %s", req.Service, req.Namespace)}
}

// maxReplicas bounds a scale from a browser; more is a CLI decision.
const maxReplicas = 100

func parseReplicas(raw *json.RawMessage) (int, error) {
	if raw == nil {
		return 0, &FieldError{Field: "replicas", Msg: "required"}
	}
	var n int
	if err := json.Unmarshal(*raw, &n); err != nil {
		return 0, &FieldError{Field: "replicas", Msg: "want a whole number, got " + string(*raw)}
	}
	if n < 0 || n > maxReplicas {
		return 0, &FieldError{Field: "replicas", Msg: fmt.Sprintf("want 0 to %d, got %d", maxReplicas, n)}
	}
	return n, nil
}

func (s *Server) scale(w http.ResponseWriter, r *http.Request) {
	req, err := s.decodeAction(r, true)
	var n int
	if err == nil {
		n, err = parseReplicas(req.Replicas)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.run(w, r, Action{Kind: "scale", Namespace: req.Namespace, Service: req.Service, Replicas: &n}, func(ctx context.Context, out io.Writer) error {
		return s.src.Scale(ctx, req.Namespace, req.Service, n, out)
	})
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	s.plainAction(w, r, "restart", true, func(ctx context.Context, req actionRequest, out io.Writer) error {
		return s.src.Restart(ctx, req.Namespace, req.Service, out)
	})
}

// startStop is POST /api/start or /api/stop: the existing Containers, no
// new revision, so no Saved State is needed.
func (s *Server) startStop(verb string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.plainAction(w, r, verb, false, func(ctx context.Context, req actionRequest, out io.Writer) error {
			return s.src.StartStop(ctx, req.Namespace, req.Service, verb, out)
		})
	}
}

// plainAction runs an action that takes only namespace and service.
func (s *Server) plainAction(w http.ResponseWriter, r *http.Request, kind string, saved bool, do func(context.Context, actionRequest, io.Writer) error) {
	req, err := s.decodeAction(r, saved)
	if err == nil && req.Replicas != nil {
		err = &FieldError{Field: "replicas", Msg: "a " + kind + " takes no replicas"}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.run(w, r, Action{Kind: kind, Namespace: req.Namespace, Service: req.Service}, func(ctx context.Context, out io.Writer) error {
		return do(ctx, req, out)
	})
}

// run records an action, runs it to its end (a closed page does not
// cancel a deploy half way: it is bounded by the deploy's own timeouts)
// and answers with its outcome.
func (s *Server) run(w http.ResponseWriter, _ *http.Request, a Action, do func(context.Context, io.Writer) error) {
	act := &action{a: a}
	act.a.Started, act.a.Status = time.Now().UTC(), "running"
	s.mu.Lock()
	act.a.ID = len(s.actions) + 1
	s.actions = append(s.actions, act)
	s.mu.Unlock()
	s.log.Info("action", "kind", a.Kind, "namespace", a.Namespace, "service", a.Service)
	err := do(context.Background(), act)
	act.mu.Lock()
	now := time.Now().UTC()
	act.a.Finished, act.a.Status = &now, "completed"
	if err != nil {
		act.a.Status, act.a.Error = "failed", err.Error()
	}
	act.mu.Unlock()
	code := http.StatusOK
	if err != nil {
		code = http.StatusBadGateway
	}
	writeJSON(w, code, act.snapshot())
}
