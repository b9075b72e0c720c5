package sdk

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DataPlane is a long-lived plugin that serves traffic of its own (Ployz's
// Internal DNS and Ingress Proxy) beside its plugin socket.
type DataPlane struct {
	// Name is the plugin name (socket default, logger name).
	Name string
	// SpecPath is the default of --spec: where the plugin keeps the
	// configuration Configure gave it (KeepConfig).
	SpecPath string
	// Plugin describes the plugin once --spec is known.
	Plugin func(specPath string) *Plugin
	// Serve runs the data plane until ctx ends and returns the exit status.
	// served delivers ServeLongLived's result if the plugin socket stops
	// first (see WaitForFile).
	Serve func(ctx context.Context, specPath string, served <-chan error, log hclog.Logger) int
}

// ServeDataPlane is the `serve [--socket PATH] [--spec PATH]` command of a
// DataPlane, what ployz-plugin@<name>.service runs: the plugin socket
// answers at once, in the background, so ployzd can attach and Configure
// the plugin whether or not the data plane serves yet; the data plane runs
// in the foreground. SIGTERM and SIGINT stop both; SIGPIPE is ignored.
func ServeDataPlane(d DataPlane, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	def := os.Getenv("PLOYZ_PLUGIN_SOCKET")
	if def == "" {
		def = DefaultSocket(d.Name)
	}
	socket := fs.String("socket", def, "plugin socket; the reattach record is written beside it")
	spec := fs.String("spec", d.SpecPath, "where the configuration ployzd gives this plugin is kept")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := NewLogger(d.Name)
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	pctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	p := d.Plugin(*spec)
	go func() { served <- ServeLongLived(pctx, p, *socket, log.Named("plugin")) }()
	defer func() {
		cancel()
		select { // the data plane has stopped; the plugin socket only drains
		case <-served:
		case <-time.After(time.Second):
		}
	}()
	return d.Serve(ctx, *spec, served, log)
}
