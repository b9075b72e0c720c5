package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ployz/ployz/core/rpc/machinepb"
	"github.com/ployz/ployz/internal/version"
)

// StreamFrame is every frame after a stream's request envelope, in both
// directions: data, an event, or both (an event describing its data, such
// as which output stream it came from), or the end of the stream.
type StreamFrame struct {
	Data  []byte          `json:"data,omitempty"`  // raw bytes (base64 in JSON)
	Event json.RawMessage `json:"event,omitempty"` // one command-defined JSON event
	EOF   bool            `json:"eof,omitempty"`   // the client has sent all its data
	Done  bool            `json:"done,omitempty"`  // the server finished successfully
	Error *Error          `json:"error,omitempty"` // the server failed; the stream ends
}

// StreamConn is one side of a running stream.
type StreamConn interface {
	Send(StreamFrame) error
	Recv() (StreamFrame, error)
}

// StreamHandler runs one streaming command locally. It returns when done;
// a returned error is sent to the client as the final frame.
type StreamHandler func(ctx context.Context, payload json.RawMessage, s StreamConn) error

// StreamRoute is one catalogued streaming command.
type StreamRoute struct {
	Command    string
	Capability string
	Handler    StreamHandler
}

type grpcStream interface {
	Send(*machinepb.Frame) error
	Recv() (*machinepb.Frame, error)
}

// CapStreamRawData says a Machine reads a stream frame's data from the
// Frame's raw data field as well as from its JSON, so a sender may skip
// base64 and JSON for bulk data (an image upload). Every Machine that
// knows it serves it.
const CapStreamRawData = "ployz.stream.raw_data.v1"

type frameConn struct {
	s grpcStream
	// raw sends data in the Frame's data field; only for a receiver
	// that serves CapStreamRawData.
	raw bool
}

func (c frameConn) Send(f StreamFrame) error {
	var data []byte
	if c.raw {
		data, f.Data = f.Data, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return c.s.Send(&machinepb.Frame{Json: b, Data: data})
}

func (c frameConn) Recv() (StreamFrame, error) {
	var f StreamFrame
	m, err := c.s.Recv()
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(m.GetJson(), &f); err != nil {
		return f, fmt.Errorf("malformed stream frame: %w", err)
	}
	if raw := m.GetData(); len(f.Data) == 0 {
		f.Data = raw
	} else if len(raw) > 0 {
		f.Data = append(f.Data, raw...)
	}
	return f, nil
}

// RawData is s sending data in each Frame's raw field, for a handler
// whose client asked for it (it reads both); s as is when s is not a
// Machine RPC stream.
func RawData(s StreamConn) StreamConn {
	if fc, ok := s.(frameConn); ok {
		fc.raw = true
		return fc
	}
	return s
}

// HandleStream adds a streaming route.
func (s *Server) HandleStream(r StreamRoute) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams == nil {
		s.streams = map[string]StreamRoute{}
	}
	s.streams[r.Command] = r
	s.routes[r.Command] = Route{Command: r.Command, Capability: r.Capability, Handler: func(context.Context, json.RawMessage) (any, error) {
		return nil, Errorf(CodeInvalidArgument, "%s is a streaming command: use Stream", r.Command)
	}}
}

// Stream implements machinepb.MachineServer.
func (s *Server) Stream(gs machinepb.Machine_StreamServer) error { return s.serveStream(gs, nil) }

// serveStream runs one stream. A non-nil only refuses the commands it
// answers an error for, and the stream is never forwarded (a port that
// serves some commands only, port.go).
func (s *Server) serveStream(gs machinepb.Machine_StreamServer, only func(command string) *Error) error {
	ctx := gs.Context()
	conn := frameConn{s: gs}
	first, err := gs.Recv()
	if err != nil {
		return err
	}
	var req Request
	if err := json.Unmarshal(first.GetJson(), &req); err != nil {
		return conn.Send(StreamFrame{Error: Errorf(CodeInvalidArgument, "request envelope: %v", err)})
	}
	if req.ProtocolMajor != version.ProtocolMajor {
		return conn.Send(StreamFrame{Error: Errorf(CodeUnsupported, "protocol_major %d is not served here (this Machine speaks %d)",
			req.ProtocolMajor, version.ProtocolMajor).With("field", "protocol_major")})
	}
	if only != nil {
		if e := only(req.Command); e != nil {
			return conn.Send(StreamFrame{Error: e})
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if t := first1(md.Get(MetaTarget)); t != "" {
		id, name := s.local()
		if t != id && t != name && !(len(t) >= 4 && strings.HasPrefix(id, t)) {
			if only != nil {
				return conn.Send(StreamFrame{Error: Errorf(CodeInvalidArgument, "%s is not forwarded from this port: call %s's own", req.Command, t).With("target", t)})
			}
			return s.forwardStream(ctx, first, t, conn)
		}
	}
	s.mu.RLock()
	r, ok := s.streams[req.Command]
	s.mu.RUnlock()
	if !ok {
		return conn.Send(StreamFrame{Error: unknownCommand(req.Command, true)})
	}
	if err := r.Handler(ctx, req.Payload, conn); err != nil {
		e := asError(err)
		if e.Code == CodeUnsupported || e.Code == CodeUnavailable {
			e = e.With("capability", r.Capability)
		}
		return conn.Send(StreamFrame{Error: e})
	}
	return conn.Send(StreamFrame{Done: true})
}

func first1(v []string) string { return first(v) }

// forwardStream relays a stream to the Machine target names, frame by frame.
func (s *Server) forwardStream(ctx context.Context, firstFrame *machinepb.Frame, target string, down frameConn) error {
	peers, err := s.listPeers(ctx)
	if err != nil {
		return down.Send(StreamFrame{Error: asError(err)})
	}
	p, err := Resolve(peers, target)
	if err != nil {
		return down.Send(StreamFrame{Error: asError(err)})
	}
	c, err := s.dial(ctx, p)
	if err != nil {
		return down.Send(StreamFrame{Error: Errorf(CodeUnavailable, "machine %s at %s: %v", p.Name, p.Address, err).With("machine_id", p.ID)})
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	up, err := c.raw.Stream(ctx)
	if err != nil {
		return down.Send(StreamFrame{Error: Errorf(CodeUnavailable, "machine %s: %v", p.Name, err).With("machine_id", p.ID)})
	}
	if err := up.Send(firstFrame); err != nil {
		return down.Send(StreamFrame{Error: Errorf(CodeUnavailable, "machine %s: %v", p.Name, err).With("machine_id", p.ID)})
	}
	// Client → target.
	go func() {
		for {
			m, err := down.s.Recv()
			if err != nil {
				up.CloseSend()
				return
			}
			if up.Send(m) != nil {
				return
			}
		}
	}()
	// Target → client.
	for {
		m, err := up.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return down.Send(StreamFrame{Error: Errorf(CodeUnavailable, "machine %s: %v", p.Name, err).With("machine_id", p.ID)})
		}
		if err := down.s.Send(s.nameLackingFrame(m, true, p)); err != nil {
			return err
		}
	}
}

// ClientStream is a running stream from the client side.
type ClientStream struct {
	conn   frameConn
	cs     grpc.BidiStreamingClient[machinepb.Frame, machinepb.Frame]
	cancel context.CancelFunc
}

// OpenStream starts command on t with payload.
func (c *Client) OpenStream(ctx context.Context, t Target, command string, payload any) (*ClientStream, error) {
	var p json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, err
		}
		p = b
	}
	b, err := json.Marshal(Request{ProtocolMajor: version.ProtocolMajor, Command: command, Payload: p})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(t.ctx(ctx))
	cs, err := c.raw.Stream(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	if err := cs.Send(&machinepb.Frame{Json: b}); err != nil {
		// io.EOF: the server already ended the stream (a refused
		// caller); its status says why.
		if errors.Is(err, io.EOF) {
			if _, rerr := cs.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
				err = rerr
			}
		}
		cancel()
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return &ClientStream{conn: frameConn{s: cs}, cs: cs, cancel: cancel}, nil
}

// Send sends one frame to the server.
func (s *ClientStream) Send(f StreamFrame) error { return s.conn.Send(f) }

// SendRawData makes later frames carry their data raw rather than base64
// in JSON; call it only when the server serves CapStreamRawData.
func (s *ClientStream) SendRawData() { s.conn.raw = true }

// CloseSend tells the server the client has no more frames.
func (s *ClientStream) CloseSend() error {
	if err := s.conn.Send(StreamFrame{EOF: true}); err != nil {
		return err
	}
	return s.cs.CloseSend()
}

// Recv returns the next server frame. A frame carrying Error is returned
// as that error; io.EOF follows Done.
func (s *ClientStream) Recv() (StreamFrame, error) {
	f, err := s.conn.Recv()
	if err != nil {
		return f, err
	}
	if f.Error != nil {
		return f, f.Error
	}
	return f, nil
}

// CloseAndAnswer tells the server the client is done and reads its
// frames to the end, decoding its (last) event into out; a server that
// failed, or already ended the stream itself, answers its error.
func (s *ClientStream) CloseAndAnswer(out any) error {
	s.CloseSend() // the answer below says what happened
	for {
		f, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(f.Event) > 0 {
			if err := json.Unmarshal(f.Event, out); err != nil {
				return fmt.Errorf("malformed answer: %w", err)
			}
		}
		if f.Done {
			return nil
		}
	}
}

// Close ends the stream.
func (s *ClientStream) Close() { s.cancel() }

// ErrUploadCut is how ReadUpload fails when the client's stream ends or
// breaks before its EOF frame.
var ErrUploadCut = errors.New("upload ended early")

// ReadUpload reads a client's data frames until its EOF frame, handing
// each non-empty chunk to data in order (a volume or image upload). A
// stream that ends first fails with ErrUploadCut; an error from data
// ends it and is returned as is.
func ReadUpload(s StreamConn, data func([]byte) error) error {
	for {
		f, err := s.Recv()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrUploadCut, err)
		}
		if f.EOF {
			return nil
		}
		if len(f.Data) == 0 {
			continue
		}
		if err := data(f.Data); err != nil {
			return err
		}
	}
}
