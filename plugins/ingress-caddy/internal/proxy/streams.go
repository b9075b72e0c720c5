package proxy

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Long-lived streams: a WebSocket (or any connection upgrade), a
// server-sent event stream and a gRPC call outlive the requests a drain
// usually waits for. A Serving Pointer move keeps them open on their old
// upstream for the drain window (ackDrain, drain.go); when it ends with
// them still open the proxy ends them itself, cleanly, before it acks
// and the Deploy stops their Container:
//
//   - a WebSocket gets a close frame 1001 (going away) each way, at a
//     frame boundary, then its connections close (websocket.go);
//   - an event stream ends as a complete response (the browser's
//     EventSource reconnects, to an upstream the new table routes to);
//   - a gRPC call ends with trailers grpc-status 14 (UNAVAILABLE), which
//     gRPC clients treat as retryable.
//
// Only requests that can be such a stream are tracked (an Upgrade, an
// Accept or Content-Type naming one of them), so other requests pay
// nothing for it. A process that stops ends them the same way before
// its last wait (serve.go).

// stream is one tracked request.
type stream struct {
	route    *httpRoute
	cancel   context.CancelFunc // ends the upstream request (event streams, gRPC)
	ws       *wsPair            // an upgrade's two connections, once switched
	upstream atomic.Pointer[string]
	kind     streamKind
	retired  atomic.Bool
	once     sync.Once
}

type streamKind uint8

const (
	streamUpgrade streamKind = iota + 1
	streamEvents
	streamGRPC
)

type streamKey struct{}

// live are the streams being proxied (a set of *stream).
var live sync.Map

// streamKindOf is the kind of stream r may start, 0 for a plain request.
func streamKindOf(r *http.Request) streamKind {
	switch {
	case r.Header.Get("Upgrade") != "":
		return streamUpgrade
	case isGRPC(r.Header.Get("Content-Type")):
		return streamGRPC
	case r.Method == http.MethodGet && strings.Contains(r.Header.Get("Accept"), "text/event-stream"):
		return streamEvents
	}
	return 0
}

// isGRPC reports whether a Content-Type is gRPC's (application/grpc,
// application/grpc+proto, ...), not gRPC-Web's, which HTTP/1.1 carries.
func isGRPC(ct string) bool {
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}

// track registers a stream of kind for r on rt; the returned context
// carries it, and done unregisters it.
func track(ctx context.Context, rt *httpRoute, kind streamKind) (context.Context, func()) {
	s := &stream{route: rt, kind: kind}
	ctx, s.cancel = context.WithCancel(ctx)
	ctx = context.WithValue(ctx, streamKey{}, s)
	live.Store(s, struct{}{})
	return ctx, func() {
		live.Delete(s)
		s.cancel()
	}
}

// streamOf is the stream a request or response belongs to, nil when it
// is not tracked.
func streamOf(ctx context.Context) *stream {
	s, _ := ctx.Value(streamKey{}).(*stream)
	return s
}

// answered records which upstream answered s, and wraps res so retiring
// s ends it cleanly: an upgrade's connection (websocket.go), an event
// stream's or a gRPC call's body. A response of another kind (the
// request only looked like a stream) is left as is.
func (s *stream) answered(res *http.Response) {
	addr := res.Request.URL.Host
	s.upstream.Store(&addr)
	switch {
	case res.StatusCode == http.StatusSwitchingProtocols:
		if bc, ok := res.Body.(io.ReadWriteCloser); ok && s.ws != nil {
			s.ws.backend = &backendConn{rwc: bc, p: s.ws}
			res.Body = s.ws.backend
		}
	case isGRPC(res.Header.Get("Content-Type")):
		res.Body = &streamBody{ReadCloser: res.Body, s: s, res: res, grpc: true}
	case isEventStream(res.Header.Get("Content-Type")):
		res.Body = &streamBody{ReadCloser: res.Body, s: s, res: res}
	}
}

func isEventStream(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "text/event-stream"
}

// retire ends s as its kind ends cleanly (once).
func (s *stream) retire() {
	s.once.Do(func() {
		s.retired.Store(true)
		if s.ws != nil && s.ws.switched() {
			s.ws.goingAway()
			return
		}
		s.cancel()
	})
}

// retireStreams retires the live streams for which which is true, and
// reports how many.
func retireStreams(which func(*stream) bool) int {
	n := 0
	live.Range(func(k, _ any) bool {
		if s := k.(*stream); which(s) {
			s.retire()
			n++
		}
		return true
	})
	return n
}

// streamBody is an event stream's or a gRPC call's body: once its stream
// is retired, the read that fails (its request cancelled) is the body's
// end, with a gRPC status the client may retry on.
type streamBody struct {
	io.ReadCloser
	s    *stream
	res  *http.Response
	grpc bool
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.s.retired.Load() {
		if b.grpc {
			if b.res.Trailer == nil {
				b.res.Trailer = http.Header{}
			}
			b.res.Trailer.Set("Grpc-Status", "14") // UNAVAILABLE
			b.res.Trailer.Set("Grpc-Message", "ployz: this upstream is retired; retry")
		}
		return n, io.EOF
	}
	return n, err
}
