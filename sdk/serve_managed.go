package sdk

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// StopTimeout bounds a graceful stop: in-flight calls get this long to
// finish before the server is closed hard.
const StopTimeout = 10 * time.Second

// ServeManaged serves p as a go-plugin child of a host. It returns when the
// host shuts the plugin down or SIGTERM stops it gracefully. go-plugin
// registers the gRPC health service (service name "plugin") the host pings.
func ServeManaged(p *Plugin, logger hclog.Logger) error {
	var (
		mu  sync.Mutex
		srv *grpc.Server
	)
	d := newDrainer()
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	go func() {
		if _, ok := <-term; !ok {
			return
		}
		logger.Info("SIGTERM: stopping gracefully")
		mu.Lock()
		s := srv
		mu.Unlock()
		if s != nil {
			d.stop(s, StopTimeout)
		}
	}()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         PluginSet(p),
		Logger:          logger,
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(append(opts, d.options()...)...)
			mu.Lock()
			srv = s
			mu.Unlock()
			return s
		},
	})
	return nil
}
