package zfsvol

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

// chunkSize is how much of a send stream one SendChunk carries.
const chunkSize = 256 << 10

// Server answers the Volume service from a Manager.
type Server struct {
	volumev1.UnimplementedVolumeServer
	M *Manager
}

// CreateVolume implements volumev1.VolumeServer.
func (s *Server) CreateVolume(ctx context.Context, req *volumev1.CreateVolumeRequest) (*volumev1.CreateVolumeResponse, error) {
	if len(req.GetOptions()) > 0 {
		return nil, status.Errorf(codes.InvalidArgument, "options: volume-zfs takes none (got %d)", len(req.GetOptions()))
	}
	vi, err := s.M.Create(ctx, req.GetName(), req.GetSizeBytes())
	if err != nil {
		return nil, err
	}
	return &volumev1.CreateVolumeResponse{Volume: vi}, nil
}

// RemoveVolume implements volumev1.VolumeServer.
func (s *Server) RemoveVolume(ctx context.Context, req *volumev1.RemoveVolumeRequest) (*volumev1.RemoveVolumeResponse, error) {
	return &volumev1.RemoveVolumeResponse{}, s.M.Remove(ctx, req.GetName())
}

// ListVolumes implements volumev1.VolumeServer.
func (s *Server) ListVolumes(ctx context.Context, _ *volumev1.ListVolumesRequest) (*volumev1.ListVolumesResponse, error) {
	vs, err := s.M.List(ctx)
	if err != nil {
		return nil, err
	}
	return &volumev1.ListVolumesResponse{Volumes: vs}, nil
}

// GetVolume implements volumev1.VolumeServer.
func (s *Server) GetVolume(ctx context.Context, req *volumev1.GetVolumeRequest) (*volumev1.GetVolumeResponse, error) {
	vi, err := s.M.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &volumev1.GetVolumeResponse{Volume: vi}, nil
}

// Snapshot implements volumev1.VolumeServer.
func (s *Server) Snapshot(ctx context.Context, req *volumev1.SnapshotRequest) (*volumev1.SnapshotResponse, error) {
	si, err := s.M.Snapshot(ctx, req.GetVolume(), req.GetSnapshot())
	if err != nil {
		return nil, err
	}
	return &volumev1.SnapshotResponse{Snapshot: si.GetName(), CreatedUnixNanos: si.GetCreatedUnixNanos()}, nil
}

// SetReadOnly implements volumev1.VolumeServer.
func (s *Server) SetReadOnly(ctx context.Context, req *volumev1.SetReadOnlyRequest) (*volumev1.SetReadOnlyResponse, error) {
	vi, err := s.M.SetReadOnly(ctx, req.GetName(), req.GetReadOnly())
	if err != nil {
		return nil, err
	}
	return &volumev1.SetReadOnlyResponse{Volume: vi}, nil
}

// DestroySnapshot implements volumev1.VolumeServer.
func (s *Server) DestroySnapshot(ctx context.Context, req *volumev1.DestroySnapshotRequest) (*volumev1.DestroySnapshotResponse, error) {
	vi, err := s.M.DestroySnapshot(ctx, req.GetVolume(), req.GetSnapshot(), req.GetBookmark())
	if err != nil {
		return nil, err
	}
	return &volumev1.DestroySnapshotResponse{Volume: vi}, nil
}

// Rollback implements volumev1.VolumeServer.
func (s *Server) Rollback(ctx context.Context, req *volumev1.RollbackRequest) (*volumev1.RollbackResponse, error) {
	vi, destroyed, err := s.M.Rollback(ctx, req.GetVolume(), req.GetSnapshot(), req.GetDestroyNewer())
	if err != nil {
		return nil, err
	}
	return &volumev1.RollbackResponse{Volume: vi, Destroyed: destroyed}, nil
}

// Pool implements volumev1.VolumeServer.
func (s *Server) Pool(_ context.Context, req *volumev1.PoolRequest) (*volumev1.PoolResponse, error) {
	return s.M.PoolInfo(req.GetPool())
}

// Send implements volumev1.VolumeServer: zfs send's output in chunks.
func (s *Server) Send(req *volumev1.SendRequest, stream volumev1.Volume_SendServer) error {
	w := &chunkWriter{send: func(b []byte) error { return stream.Send(&volumev1.SendChunk{Data: b}) }, buf: make([]byte, 0, chunkSize)}
	if req.GetEstimate() {
		// Without an estimate the stream still goes: progress then has
		// no ETA.
		if n, err := s.M.Estimate(stream.Context(), req); err == nil {
			if err := stream.Send(&volumev1.SendChunk{EstimatedBytes: n}); err != nil {
				return err
			}
		}
	}
	if err := s.M.Send(stream.Context(), req, w); err != nil {
		return err
	}
	return w.flush()
}

// chunkWriter cuts a byte stream into messages of up to chunkSize.
type chunkWriter struct {
	send func([]byte) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(cap(w.buf)-len(w.buf), len(p))
		w.buf, p = append(w.buf, p[:k]...), p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = w.buf[:0]
	return err
}

// Receive implements volumev1.VolumeServer: the chunks into zfs receive.
func (s *Server) Receive(stream volumev1.Volume_ReceiveServer) error {
	first, err := stream.Recv()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "receive: no header: %v", err)
	}
	h := first.GetHeader()
	if h == nil {
		return status.Error(codes.InvalidArgument, "header: the first message carries no header")
	}
	r := &chunkReader{recv: stream.Recv, cur: first.GetData()}
	n, err := s.M.Receive(stream.Context(), h.GetVolume(), h.GetResumable(), r)
	if err != nil {
		return err
	}
	vi, err := s.M.Get(stream.Context(), h.GetVolume())
	if err != nil {
		return err
	}
	return stream.SendAndClose(&volumev1.ReceiveResponse{Volume: vi, Bytes: n})
}

// chunkReader reads the data of a ReceiveChunk stream; io.EOF at its end.
type chunkReader struct {
	recv func() (*volumev1.ReceiveChunk, error)
	cur  []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		c, err := r.recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, err
		}
		r.cur = c.GetData()
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
