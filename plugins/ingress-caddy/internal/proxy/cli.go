package proxy

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ployz/ployz/sdk"
	"github.com/ployz/ployz/sdk/ingress"
)

// Main is the ployz-ingress-caddy command line; it returns the exit status.
//
//	ployz-ingress-caddy serve-ingress [--spec PATH]   serve the spec (the runtime unit runs this)
//	ployz-ingress-caddy status [--file PATH]          debug: print the status file
//	ployz-ingress-caddy info | serve | --version      the SDK's plugin modes
func Main(version string, args []string, stdout, stderr io.Writer) int {
	p := &sdk.Plugin{
		Name:        "ingress-caddy",
		Kind:        sdk.KindIngress,
		Version:     version,
		Description: "Ingress Proxy: embedded Caddy routing HTTP hostnames to ready Containers from the store (serve-ingress under the daemon's runtime unit).",
	}
	if len(args) == 0 {
		sdk.Main(p)
		return 0
	}
	switch args[0] {
	case "serve-ingress":
		fs := flag.NewFlagSet("serve-ingress", flag.ContinueOnError)
		fs.SetOutput(stderr)
		spec := fs.String("spec", ingress.DefaultSpecPath, "the ingress.json spec the daemon publishes")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		log := sdk.NewLogger("ingress")
		signal.Ignore(syscall.SIGPIPE)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		err := Serve(ctx, Options{SpecPath: *spec, Log: log})
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
	case "status":
		fs := flag.NewFlagSet("status", flag.ContinueOnError)
		fs.SetOutput(stderr)
		file := fs.String("file", ingress.DefaultStatusPath, "the status file serve-ingress writes")
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
	sdk.Main(p)
	return 0
}
