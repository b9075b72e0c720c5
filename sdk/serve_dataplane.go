package sdk

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	// Sockets, when set, lists the listening sockets the data plane serves
	// (by fd store name) so HandoffSignal can start a successor on them
	// without a gap (see HandoffSignal); nil turns handoff off. It is
	// called on the handoff goroutine while Serve runs, so what it reads
	// must be safe to share (fdstore.Held locks).
	Sockets func() []HandoffSocket
}

// ServeDataPlane is the `serve [--socket PATH] [--spec PATH]` command of a
// DataPlane, what ployz-plugin@<name>.service runs: the plugin socket
// answers at once, in the background, so ployzd can attach and Configure
// the plugin whether or not the data plane serves yet; the data plane runs
// in the foreground. SIGTERM and SIGINT stop both; SIGPIPE is ignored;
// HandoffSignal hands the sockets to a successor first (DataPlane.Sockets).
func ServeDataPlane(d DataPlane, args []string, stderr io.Writer) int {
	from, successor := takeHandoffEnv()
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
	if successor {
		log.Info("handoff: starting as the successor", "from_pid", from)
	}
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	dctx, handedOver := context.WithCancelCause(ctx)
	defer handedOver(nil)
	if d.Sockets != nil {
		go handoffLoop(dctx, d.Sockets, HandoffReportPath(*socket), handedOver, log)
	}

	pctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	p := d.Plugin(*spec)
	opts := longLivedOpts{takeover: successor, handoff: d.Sockets != nil}
	go func() { served <- serveLongLived(pctx, p, *socket, log.Named("plugin"), opts) }()
	defer func() {
		cancel()
		select { // the data plane has stopped; the plugin socket only drains
		case <-served:
		case <-time.After(time.Second):
		}
	}()
	return d.Serve(dctx, *spec, served, log)
}

// errHandedOver ends the data plane once a successor serves it.
var errHandedOver = errors.New("handed over to the successor")

// HandedOver reports whether the data plane's ctx ended because a
// successor now serves its sockets (a handoff), rather than a stop: new
// connections are then already answered by the successor, so the data
// plane may take longer to let its own clients go.
func HandedOver(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), errHandedOver)
}

// handoffLoop answers HandoffSignal: start a successor on the sockets,
// make it the unit's main process once it serves, then end ctx (the data
// plane stops as on SIGTERM). A failed handoff leaves this process serving
// and is written to report (HandoffReport) for the host that asked.
func handoffLoop(ctx context.Context, sockets func() []HandoffSocket, report string, handedOver context.CancelCauseFunc, log hclog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, HandoffSignal)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		start := time.Now()
		pid, err := startSuccessor(ctx, sockets(), log)
		if err != nil {
			log.Error("handoff failed; this process keeps serving", "error", err, "after", time.Since(start))
			r := HandoffReport{Pid: os.Getpid(), Binary: os.Args[0], Error: err.Error(), At: time.Now()}
			if werr := WriteHandoffReport(report, r); werr != nil {
				log.Warn("could not report the failed handoff to the host", "path", report, "error", werr)
			}
			continue
		}
		if err := sdNotify(fmt.Sprintf("MAINPID=%d", pid)); err != nil {
			log.Warn("could not name the successor the unit's main process", "pid", pid, "error", err)
		} else if err := sdBarrier(5 * time.Second); err != nil {
			// Stopping before systemd took the new main pid would look like
			// the service exiting, and its restart would stop the successor.
			log.Warn("systemd did not confirm the new main pid", "pid", pid, "error", err)
		}
		log.Info("handoff: the successor serves; stopping", "pid", pid, "after", time.Since(start))
		handedOver(errHandedOver)
		return
	}
}
