package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStreamForwarded uploads data through an entry to another Machine
// and reads its events back, then checks a stream error arrives as *Error.
func TestStreamForwarded(t *testing.T) {
	ms := cluster(t, "m1", "m2")
	for _, m := range ms {
		m.srv.HandleStream(StreamRoute{Command: "count", Capability: "ployz.test.count.v1",
			Handler: func(ctx context.Context, payload json.RawMessage, s StreamConn) error {
				var req struct{ Fail bool }
				json.Unmarshal(payload, &req)
				if req.Fail {
					return Errorf(CodeInvalidArgument, "asked to fail").With("field", "fail")
				}
				n := 0
				for {
					f, err := s.Recv()
					if err != nil {
						return err
					}
					if f.EOF {
						break
					}
					n += len(f.Data)
				}
				ev, _ := json.Marshal(map[string]any{"bytes": n, "machine": m.name})
				return s.Send(StreamFrame{Event: ev})
			}})
	}
	c := client(t, ms[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	st, err := c.OpenStream(ctx, Target{One: "m2"}, "count", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 10 {
		if err := st.Send(StreamFrame{Data: make([]byte, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	f, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Bytes   int
		Machine string
	}
	json.Unmarshal(f.Event, &ev)
	if ev.Bytes != 10000 || ev.Machine != "m2" {
		t.Fatalf("event = %+v", ev)
	}
	if f, err := st.Recv(); err != nil || !f.Done {
		t.Fatalf("want done, got %+v %v", f, err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("want EOF after done, got %v", err)
	}

	st2, err := c.OpenStream(ctx, Target{}, "count", map[string]bool{"Fail": true})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	_, err = st2.Recv()
	var e *Error
	if !errors.As(err, &e) || e.Details["field"] != "fail" {
		t.Fatalf("stream refusal = %v", err)
	}
}

// TestStreamRawData: a client that sends data raw (outside the JSON) is
// read by the server exactly as base64 data is, also through a
// forwarding entry, and every server advertises that it reads it so.
func TestStreamRawData(t *testing.T) {
	ms := cluster(t, "m1", "m2")
	got := make(chan []byte, 1)
	ms[1].srv.HandleStream(StreamRoute{Command: "collect", Capability: "ployz.test.collect.v1",
		Handler: func(ctx context.Context, _ json.RawMessage, s StreamConn) error {
			var all []byte
			for {
				f, err := s.Recv()
				if err != nil {
					return err
				}
				if f.EOF {
					got <- all
					return nil
				}
				all = append(all, f.Data...)
			}
		}})
	if !slices.Contains(ms[0].srv.Capabilities(), CapStreamRawData) {
		t.Fatalf("capabilities %v lack %s", ms[0].srv.Capabilities(), CapStreamRawData)
	}
	c := client(t, ms[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.OpenStream(ctx, Target{One: "m2"}, "collect", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Send(StreamFrame{Data: []byte("base64 ")})
	st.SendRawData()
	want := "base64 "
	for i := range 5 {
		b := bytes.Repeat([]byte{byte('a' + i)}, 70000)
		want += string(b)
		if err := st.Send(StreamFrame{Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if f, err := st.Recv(); err != nil || !f.Done {
		t.Fatalf("want done, got %+v %v", f, err)
	}
	if b := <-got; string(b) != want {
		t.Fatalf("server read %d bytes, want %d", len(b), len(want))
	}
}

// TestStreamRawDataToClient: a handler that sends through RawData(s)
// reaches the client, through a forwarding entry, with its data in the
// Frame's raw field, read as base64 data is.
func TestStreamRawDataToClient(t *testing.T) {
	ms := cluster(t, "m1", "m2")
	ms[1].srv.HandleStream(StreamRoute{Command: "emit", Capability: "ployz.test.emit.v1",
		Handler: func(ctx context.Context, _ json.RawMessage, s StreamConn) error {
			if err := s.Send(StreamFrame{Data: []byte("json ")}); err != nil {
				return err
			}
			s = RawData(s)
			for i := range 3 {
				if err := s.Send(StreamFrame{Data: bytes.Repeat([]byte{byte('a' + i)}, 70000)}); err != nil {
					return err
				}
			}
			return nil
		}})
	c := client(t, ms[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.OpenStream(ctx, Target{One: "m2"}, "emit", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var all []byte
	for {
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, f.Data...)
		if f.Done {
			break
		}
	}
	want := "json " + strings.Repeat("a", 70000) + strings.Repeat("b", 70000) + strings.Repeat("c", 70000)
	if string(all) != want {
		t.Fatalf("client read %d bytes, want %d", len(all), len(want))
	}
	if RawData(nil) != nil {
		t.Fatal("RawData of a non-RPC stream changed it")
	}
}
