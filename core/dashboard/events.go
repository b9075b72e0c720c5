package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// sse writes Server-Sent Events to one client.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func openSSE(w http.ResponseWriter) (*sse, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errors.New("streaming unsupported")
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sse{w: w, f: f}, nil
}

func (e *sse) send(event string, data []byte) error {
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}

// viewState is one poll's answer as the page receives it.
type viewState struct {
	Data  any    `json:"data,omitempty"`
	Error string `json:"error,omitempty"`
	Field string `json:"field,omitempty"`
}

// events streams a view: the Source is read every Poll, and the page gets
// the new state only when it changed, so a view updates without reload.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("view")
	if name == "" {
		writeError(w, &FieldError{Field: "view", Msg: "required"})
		return
	}
	out, err := openSSE(w)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var last []byte
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	for {
		b := s.poll(r.Context(), name, q.Get)
		if !bytes.Equal(b, last) {
			if out.send("view", b) != nil {
				return
			}
			last = b
		} else if _, err := fmt.Fprint(w, ": idle\n\n"); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}

// poll reads a view once, bounding the read by the poll interval's
// patience so one slow Machine cannot stall the page forever.
func (s *Server) poll(ctx context.Context, name string, get func(string) string) []byte {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var st viewState
	v, err := s.view(ctx, name, get)
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		st.Error, st.Field = fe.Msg, fe.Field
	case err != nil:
		st.Error = err.Error()
	default:
		st.Data = v
	}
	b, err := json.Marshal(st)
	if err != nil {
		b, _ = json.Marshal(viewState{Error: err.Error()})
	}
	return b
}

// logs follows a Service's output across Machines as events.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns, svc := q.Get("namespace"), q.Get("service")
	if ns == "" || svc == "" {
		writeError(w, &FieldError{Field: map[bool]string{true: "namespace", false: "service"}[ns == ""], Msg: "required"})
		return
	}
	out, err := openSSE(w)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	lines := make(chan LogLine, 256)
	done := make(chan error, 1)
	go func() {
		done <- s.src.Logs(r.Context(), ns, svc, func(l LogLine) {
			select {
			case lines <- l:
			case <-r.Context().Done():
			}
		})
	}()
	for {
		select {
		case l := <-lines:
			b, _ := json.Marshal(l)
			if out.send("line", b) != nil {
				return
			}
		case err := <-done:
			for len(lines) > 0 {
				b, _ := json.Marshal(<-lines)
				if out.send("line", b) != nil {
					return
				}
			}
			msg := "the log streams ended"
			if err != nil {
				msg = err.Error()
			}
			b, _ := json.Marshal(LogLine{Error: msg})
			_ = out.send("end", b)
			return
		}
	}
}
