package proxy

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/fdstore"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// Main is the ployz-ingress-caddy command line; it returns the exit status.
//
//	ployz-ingress-caddy serve [--socket PATH] [--spec PATH]   long-lived plugin: ployz-plugin@ingress-caddy.service runs this
//	ployz-ingress-caddy status [--file PATH]                  debug: print the status file
//	ployz-ingress-caddy info | --version                      the SDK's plugin modes
func Main(version string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		sdk.Main(plugin(version, "", nil))
		return 0
	}
	switch args[0] {
	case "serve":
		return serveLongLived(version, args[1:], stderr)
	case "status":
		fs := flag.NewFlagSet("status", flag.ContinueOnError)
		fs.SetOutput(stderr)
		file := fs.String("file", ingress.DefaultStatusPath, "the status file `serve` writes")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		b, err := os.ReadFile(*file)
		if err != nil {
			fmt.Fprintln(stderr, "ployz-ingress-caddy status:", err)
			return 1
		}
		stdout.Write(b)
		return 0
	}
	sdk.Main(plugin(version, "", nil))
	return 0
}

// plugin describes ployz-ingress-caddy to the SDK. With a spec path it
// takes its spec through Configure (the bytes of an ingress.Spec; empty
// keeps the last one) and advertises what kept serves.
func plugin(version, specPath string, kept *ingress.Spec) *sdk.Plugin {
	p := &sdk.Plugin{
		Name:         "ingress-caddy",
		Kind:         sdk.KindIngress,
		Version:      version,
		Description:  "Ingress Proxy: embedded Caddy routing HTTP hostnames and TCP ports to ready Containers from the store.",
		Capabilities: ingress.Capabilities(kept),
		Register:     func(*grpc.Server) {}, // the proxy is driven by its spec and the store
		// The route builder's store subscriptions (serving.Watch) count here.
		StoreEventsDropped: store.DroppedEvents,
		// Forged or stray containers rows no route is given.
		RefusedContainerRows: serving.RefusedRows,
	}
	if specPath != "" {
		p.Configure = func(_ context.Context, _ uint32, config []byte) error { return applySpec(specPath, config) }
	}
	return p
}

// applySpec validates spec and keeps it at path unless it is empty or
// unchanged; the serving loop restarts onto a changed one (ErrSpecChanged).
func applySpec(path string, spec []byte) error {
	if t := bytes.TrimSpace(spec); len(t) == 0 || string(t) == "null" {
		return nil // a host with nothing to say (e.g. `ployzd plugins ls`)
	}
	if _, err := ingress.ParseSpec(spec); err != nil {
		return err
	}
	_, err := sdk.KeepConfig(path, spec)
	return err
}

// serveLongLived is `ployz-ingress-caddy serve`: the plugin socket answers
// at once (so ployzd can attach and Configure it), and the proxy serves the
// kept spec as soon as there is one. A restart finds the kept spec and the
// listening sockets in systemd's fd store and serves without ployzd.
func serveLongLived(version string, args []string, stderr io.Writer) int {
	tuneGC()
	var kept *ingress.Spec
	return sdk.ServeDataPlane(sdk.DataPlane{
		Name:     "ingress-caddy",
		SpecPath: ingress.DefaultSpecPath,
		Sockets:  fdstore.Held,
		Plugin: func(spec string) *sdk.Plugin {
			if s, _, err := ingress.LoadSpec(spec); err == nil {
				kept = &s
			}
			return plugin(version, spec, kept)
		},
		Serve: func(ctx context.Context, spec string, served <-chan error, log hclog.Logger) int {
			if kept == nil {
				// Configured for the first time: restart so Info advertises
				// what the spec turns on (HTTPS), as every later start does.
				if sdk.WaitForFile(ctx, spec, served, log) {
					log.Info("configured; restarting onto the spec", "spec", spec)
				}
				return 0
			}
			err := Serve(ctx, Options{SpecPath: spec, Log: log})
			switch {
			case err == nil:
				return 0
			case errors.Is(err, ErrSpecChanged):
				log.Info(err.Error())
				return 0
			default:
				log.Error("ingress", "error", err)
				return 1
			}
		},
	}, args, stderr)
}

// gcPercent is the serving process's GOGC. Its live heap is small (the
// routing table, connection buffers) and its garbage is per request: at
// Go's default of 100 a loaded proxy collected several times a second
// and spent about 7% of its CPU collecting (docs/benchmarks.md); 400
// collects a quarter as often for a few MB more heap.
const gcPercent = 400

// tuneGC sets gcPercent unless GOGC in the environment says otherwise.
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
