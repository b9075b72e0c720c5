package logstore

import (
	"context"
	"io"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/observe"
	logstorev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/logstore/v1"
)

// Loop timing.
const (
	pollEvery    = 500 * time.Millisecond
	enforceEvery = 30 * time.Second
)

// Main is the ployz-logstore command line; it returns the exit status.
//
//	ployz-logstore serve [--socket PATH] [--spec PATH]   long-lived plugin (ployz-plugin@logstore.service)
//	ployz-logstore info | --version                      the SDK's plugin modes
func Main(version string, args []string, stderr io.Writer) int {
	return observe.Main(args, func(serving bool) *sdk.Plugin {
		if !serving {
			return Plugin(version, nil, "")
		}
		return Plugin(version, &Server{}, "")
	}, func(args []string) int { return serve(version, args, stderr) })
}

// Plugin describes ployz-logstore; a non-nil srv serves the LogStore
// service and advertises its capabilities, and Configure keeps the spec at
// specPath.
func Plugin(version string, srv *Server, specPath string) *sdk.Plugin {
	p := &sdk.Plugin{
		Name:        "logstore",
		Kind:        sdk.KindLogStore,
		Version:     version,
		Description: "Log Store: keeps this Machine's Container output (Docker's local driver files) after the Containers are removed.",
	}
	if srv == nil {
		return p
	}
	p.Capabilities = []string{observe.CapTailLogs, observe.CapLogHistory}
	p.Register = func(g *grpc.Server) { logstorev1.RegisterLogStoreServer(g, srv) }
	p.Configure = observe.Configure(specPath)
	return p
}

func serve(version string, args []string, stderr io.Writer) int {
	srv := &Server{}
	return observe.Serve("logstore", observe.DefaultLogSpecPath, func(spec string) *sdk.Plugin { return Plugin(version, srv, spec) },
		func(ctx context.Context, spec string, log hclog.Logger) error { return Run(ctx, spec, srv, log) }, args, stderr)
}

// Run ingests and enforces retention until ctx ends or the kept spec
// changes (it returns nil then, and systemd starts the plugin again on
// the new spec).
func Run(ctx context.Context, specPath string, srv *Server, log hclog.Logger) error {
	spec, err := observe.LoadSpec(specPath)
	if err != nil {
		return err
	}
	st, err := Open(spec.LogsDir())
	if err != nil {
		return err
	}
	st.SetChunkBytes(ChunkBytesFor(spec.Budget.MaxBytes))
	in := NewIngester(spec.DockerRoot, st, log.Named("ingest"))
	defer in.Close()
	srv.ready(st, in)
	log.Info("keeping Container output", "docker_root", spec.DockerRoot, "dir", st.Dir(), "max_bytes", spec.Budget.MaxBytes,
		"max_age", spec.Budget.MaxAge(), "min_free_bytes", spec.Budget.MinFreeBytes)
	watch := observe.WatchSpec(specPath, spec)
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	var lastEnforce time.Time
	var writtenAt int64 // st.Written() at the last enforcement
	for {
		select {
		case <-ctx.Done():
			return st.Flush()
		case <-poll.C:
		}
		if err := in.Poll(); err != nil {
			log.Warn("ingest", "error", err)
		}
		// A flood is held to the budget: retention also runs once lines
		// worth a sixteenth of it were written.
		if time.Since(lastEnforce) >= enforceEvery || st.Written()-writtenAt >= enforceAfterBytes(spec.Budget) {
			lastEnforce, writtenAt = time.Now(), st.Written()
			enforce(st, spec, lastEnforce, log)
		}
		if watch.Changed() {
			log.Info("spec changed; restarting onto it")
			return st.Flush()
		}
	}
}

func enforceAfterBytes(b observe.Budget) int64 { return max(b.MaxBytes/16, minChunkBytes) }

func enforce(st *Store, spec observe.Spec, now time.Time, log hclog.Logger) {
	ev, err := st.Enforce(now, spec.Budget, Usage{Others: obsfs.Size(spec.MetricsDir()), Free: freeBytes(st.Dir())})
	if err != nil {
		log.Warn("retention", "error", err)
	}
	var chunks, bytes int64
	for _, e := range ev {
		if e.Container == "" {
			log.Info("retention deleted an hour of logs", "hour", e.Hour, "bytes", e.Bytes, "reason", e.Reason)
			continue
		}
		chunks, bytes = chunks+1, bytes+e.Bytes
	}
	if chunks > 0 {
		log.Info("retention deleted the oldest chunks of the current hour", "chunks", chunks, "bytes", bytes, "reason", ev[len(ev)-1].Reason)
	}
}

// freeBytes is the space left to unprivileged writers on dir's
// filesystem; -1 when unknown.
func freeBytes(dir string) int64 {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return -1
	}
	return int64(fs.Bavail) * int64(fs.Bsize)
}
