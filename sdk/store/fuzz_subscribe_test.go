package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// readStream runs the subscription decoder over one NDJSON stream and
// returns what it delivered and why it stopped.
func readStream(t *testing.T, data []byte, strict bool) ([]Event, error) {
	t.Helper()
	s := &Subscription{ID: "fz", opts: SubscribeOptions{Strict: strict}, events: make(chan Event)}
	got := make(chan []Event)
	go func() {
		var evs []Event
		for ev := range s.events {
			evs = append(evs, ev)
		}
		got <- evs
	}()
	err := s.read(context.Background(), json.NewDecoder(bytes.NewReader(data)), false)
	close(s.events)
	return <-got, err
}

// encodeStream writes events the way the store server does, one JSON
// object a line.
func encodeStream(t *testing.T, evs []Event) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.Encode(map[string]any{"columns": []string{"id", "body"}}) // bytes.Buffer
	for _, ev := range evs {
		var v any
		switch ev.Kind {
		case EventRow:
			v = map[string]any{"row": []any{ev.RowID, ev.Values}}
		case EventEOQ:
			v = map[string]any{"eoq": map[string]any{"time": 0.001, "change_id": ev.ChangeID}}
		case EventChange:
			v = map[string]any{"change": []any{ev.ChangeKind, ev.RowID, ev.Values, ev.ChangeID}}
		default:
			t.Fatalf("delivered an event of kind %q", ev.Kind)
		}
		if err := enc.Encode(v); err != nil {
			t.Fatalf("re-encode %+v: %v", ev, err)
		}
	}
	return b.Bytes()
}

func valuesJSON(t *testing.T, v []any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("values %v: %v", v, err)
	}
	return string(b)
}

// FuzzSubscriptionStream feeds arbitrary bytes to the subscription's
// NDJSON decoder, as a hostile or broken store server could send them.
// Properties: no panic; the stream always ends with an error (a server
// never ends a subscription cleanly); change ids only grow past the last
// one delivered; strict mode refuses repeats and unknown events and the
// tolerant mode skips them; whatever was delivered encodes back into a
// stream that delivers the same events.
func FuzzSubscriptionStream(f *testing.F) {
	f.Add([]byte(`{"columns":["id","body"]}
{"row":[1,["c1","{\"state\":\"running\"}"]]}
{"eoq":{"time":0.001,"change_id":0}}
{"change":["update",1,["c1","{}"],1]}
{"change":["insert",2,["c2",2.5,null,true],2]}
`), true)
	f.Add([]byte(`{"change":["update",1,["c1"],3]}
{"change":["update",1,["c1"],3]}
`), false)
	f.Add([]byte(`{"eoq":{"time":0}}
{"something_new":1}
{"error":"boom"}
`), true)
	f.Fuzz(func(t *testing.T, data []byte, strict bool) {
		evs, err := readStream(t, data, strict)
		if err == nil {
			t.Fatal("the stream ended without an error")
		}
		var fatal *fatalError
		if errors.As(err, &fatal) && fatal.msg == "" {
			t.Fatal("a refusal with an empty message")
		}
		var last int64
		for _, ev := range evs {
			switch ev.Kind {
			case EventEOQ:
				last = ev.ChangeID
			case EventChange:
				if ev.ChangeID <= last {
					t.Fatalf("change %d delivered after %d", ev.ChangeID, last)
				}
				last = ev.ChangeID
			case EventRow:
			default:
				t.Fatalf("delivered an event of kind %q", ev.Kind)
			}
		}
		if !strict {
			// Everything tolerated here is refused in strict mode, and
			// strict mode delivers a prefix of the same events.
			sevs, _ := readStream(t, data, true)
			if len(sevs) > len(evs) {
				t.Fatalf("strict mode delivered more (%d) than tolerant mode (%d)", len(sevs), len(evs))
			}
		}
		again, err := readStream(t, encodeStream(t, evs), true)
		if !errors.Is(err, io.EOF) {
			t.Fatalf("re-encoded stream: %v", err)
		}
		if len(again) != len(evs) {
			t.Fatalf("re-encoded stream delivered %d events, want %d", len(again), len(evs))
		}
		for i := range evs {
			a, b := evs[i], again[i]
			if a.Kind != b.Kind || a.ChangeKind != b.ChangeKind || a.RowID != b.RowID || a.ChangeID != b.ChangeID ||
				valuesJSON(t, a.Values) != valuesJSON(t, b.Values) {
				t.Fatalf("event %d: %+v round-tripped to %+v", i, a, b)
			}
		}
	})
}

// TestStrictSubscriptionReportsRepeats: a server that sends a change
// twice ends a Strict subscription with an error naming the repeat, and
// an unknown event ends it too; a tolerant one skips both.
func TestStrictSubscriptionReportsRepeats(t *testing.T) {
	for _, tc := range []struct {
		name, stream, want string
	}{
		{"repeat", `{"change":["insert",1,["a"],1]}` + "\n" + `{"change":["insert",1,["a"],1]}` + "\n", "change 1 repeated"},
		{"unknown", `{"change":["insert",1,["a"],1]}` + "\n" + `{"future_kind":{}}` + "\n", "unknown event"},
	} {
		defer func(was bool) { strictEvents = was }(strictEvents)
		strictEvents = false // this test chooses per subscription
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("corro-query-id", "q1")
				fmt.Fprintln(w, `{"columns":["id"]}`)
				fmt.Fprint(w, tc.stream)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}))
			defer srv.Close()
			c := New(strings.TrimPrefix(srv.URL, "http://"))
			for _, strict := range []bool{true, false} {
				sub, err := c.Subscribe(context.Background(), Stmt("SELECT id FROM t"), SubscribeOptions{Strict: strict})
				if err != nil {
					t.Fatal(err)
				}
				if ev := next(t, sub); ev.ChangeID != 1 {
					t.Fatalf("first change %+v", ev)
				}
				select {
				case ev, ok := <-sub.Events:
					if ok {
						t.Fatalf("strict=%t: delivered %+v", strict, ev)
					}
					if !strict || sub.Err() == nil || !strings.Contains(sub.Err().Error(), tc.want) {
						t.Fatalf("strict=%t: ended with %v, want %q", strict, sub.Err(), tc.want)
					}
				case <-time.After(300 * time.Millisecond):
					if strict {
						t.Fatal("strict subscription went on after the bad event")
					}
				}
				sub.Close()
			}
		})
	}
}
