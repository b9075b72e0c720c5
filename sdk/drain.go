package sdk

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// drainer counts in-flight plugin calls so a stop can wait for them. It
// exists because grpc.Server.GracefulStop also waits for go-plugin's own
// never-ending streams (broker, stdio), so with a host attached it would
// always run into the timeout.
type drainer struct {
	mu       sync.Mutex
	inflight int
	idle     *sync.Cond
}

func newDrainer() *drainer {
	d := &drainer{}
	d.idle = sync.NewCond(&d.mu)
	return d
}

// options returns the server options that feed the counter.
func (d *drainer) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			d.add(1)
			defer d.add(-1)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			// Only Ployz's own streams; go-plugin's and health's live forever.
			if strings.HasPrefix(info.FullMethod, "/ployz.") {
				d.add(1)
				defer d.add(-1)
			}
			return h(srv, ss)
		}),
	}
}

func (d *drainer) add(n int) {
	d.mu.Lock()
	d.inflight += n
	if d.inflight == 0 {
		d.idle.Broadcast()
	}
	d.mu.Unlock()
}

// stop refuses new calls, waits up to timeout for in-flight Ployz calls to
// finish, then closes every connection.
func (d *drainer) stop(s *grpc.Server, timeout time.Duration) {
	go s.GracefulStop() // closes the listeners and refuses new calls at once
	done := make(chan struct{})
	go func() {
		d.mu.Lock()
		for d.inflight > 0 {
			d.idle.Wait()
		}
		d.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
	s.Stop()
}
