package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/fdstore"
	"github.com/ployz/ployz/sdk/observe"
	metricsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/metrics/v1"
)

// Main is the ployz-metrics command line; it returns the exit status.
//
//	ployz-metrics serve [--socket PATH] [--spec PATH]   long-lived plugin (ployz-plugin@metrics.service)
//	ployz-metrics info | --version                      the SDK's plugin modes
func Main(version string, args []string, stderr io.Writer) int {
	return observe.Main(args, func(serving bool) *sdk.Plugin {
		if !serving {
			return Plugin(version, nil, "")
		}
		return Plugin(version, &Server{}, "")
	}, func(args []string) int { return serve(version, args, stderr) })
}

// Plugin describes ployz-metrics; a non-nil srv serves the Metrics service.
func Plugin(version string, srv *Server, specPath string) *sdk.Plugin {
	p := &sdk.Plugin{
		Name:        "metrics",
		Kind:        sdk.KindMetrics,
		Version:     version,
		Description: "Metrics: samples this Machine and its Containers every 10 s, keeps 24 h of samples and 90 days of 5-minute Rollups.",
	}
	if srv == nil {
		return p
	}
	p.Capabilities = []string{observe.CapQueryMetrics}
	p.Register = func(g *grpc.Server) { metricsv1.RegisterMetricsServer(g, srv) }
	p.Configure = observe.Configure(specPath)
	return p
}

func serve(version string, args []string, stderr io.Writer) int {
	srv := &Server{}
	return observe.Serve("metrics", observe.DefaultMetricsSpecPath, func(spec string) *sdk.Plugin { return Plugin(version, srv, spec) },
		func(ctx context.Context, spec string, log hclog.Logger) error { return Run(ctx, spec, srv, log) }, args, stderr)
}

// FDNameHTTP names the Prometheus endpoint's socket in the unit's fd
// store.
const FDNameHTTP = "ployz-metrics-http"

// Run samples every Interval until ctx ends or the kept spec changes.
func Run(ctx context.Context, specPath string, srv *Server, log hclog.Logger) error {
	spec, err := observe.LoadSpec(specPath)
	if err != nil {
		return err
	}
	st, err := Open(spec.MetricsDir())
	if err != nil {
		return err
	}
	if err := st.Started(time.Now()); err != nil {
		log.Warn("record downtime", "error", err)
	}
	srv.ready(st)
	// The Observe Store's size is a directory walk: its own slow tick.
	size := &Slow{Every: time.Minute, Timeout: 10 * time.Second, Read: func(context.Context) (float64, error) {
		return float64(obsfs.Size(spec.StateDir)), nil
	}}
	go size.Run(ctx)
	col := &Collector{Sys: Sys{Proc: "/proc", Cgroup: "/sys/fs/cgroup", Containers: filepath.Join(spec.DockerRoot, "containers"), DiskPath: spec.DockerRoot},
		ObserveBytes: size.Last}
	if spec.CountersFile != "" {
		col.Counters = func() (observe.Counters, error) { return observe.ReadCounters(spec.CountersFile) }
	}
	if spec.MetricsListen == "" {
		fdstore.Forget(FDNameHTTP) // no longer served: the port goes back
	} else {
		// Kept in the unit's fd store: a restart or a new spec never
		// frees the port for another local user to take.
		l, err := fdstore.ListenTCP(FDNameHTTP, spec.MetricsListen)
		if err != nil {
			log.Error("prometheus endpoint not served", "listen", spec.MetricsListen, "error", err)
		} else {
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				if err := hs.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					log.Error("prometheus endpoint", "error", err)
				}
			}()
			defer hs.Close()
			log.Info("prometheus endpoint", "url", "http://"+spec.MetricsListen+"/metrics")
		}
	}
	log.Info("sampling", "every", Interval, "dir", spec.MetricsDir())
	watch := observe.WatchSpec(specPath, spec)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	var lastFold time.Time
	for {
		now := time.Now()
		t := col.Collect(now)
		srv.setLast(t)
		if err := st.Write(t); err != nil {
			log.Warn("write samples", "error", err)
		}
		if now.Sub(lastFold) >= time.Minute {
			lastFold = now
			if err := st.Fold(now); err != nil {
				log.Warn("fold rollups", "error", err)
			}
		}
		if watch.Changed() {
			log.Info("spec changed; restarting onto it")
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
