package sdk

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/protojson"
)

// Main is the whole main function of a plugin binary. It validates p and
// runs the mode the command line asks for:
//
//	ployz-NAME                        managed mode (started by ployzd)
//	ployz-NAME serve [--socket PATH]  long-lived mode (systemd unit)
//	ployz-NAME info                   print Info as JSON and exit
//	ployz-NAME --version              print the version and exit
//
// The socket defaults to $PLOYZ_PLUGIN_SOCKET, else DefaultSocket(p.Name).
// Main exits the process.
func Main(p *Plugin) {
	os.Exit(run(p, os.Args[1:], os.Stdout, os.Stderr))
}

func run(p *Plugin, args []string, stdout, stderr io.Writer) int {
	logger := NewLogger(p.Name)
	if err := p.Validate(); err != nil {
		logger.Error("invalid plugin description", "error", err)
		return 2
	}
	if len(args) == 0 {
		if os.Getenv(MagicCookieKey) != MagicCookieValue {
			fmt.Fprintf(stderr, "ployz-%s is a Ployz plugin: ployzd starts it, or run `ployz-%s serve --socket PATH` for long-lived mode.\n", p.Name, p.Name)
			return 2
		}
		announce(p, logger)
		if err := ServeManaged(p, logger); err != nil {
			logger.Error("managed serve failed", "error", err)
			return 1
		}
		return 0
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintf(stdout, "ployz-%s %s\n", p.Name, p.Version)
		return 0
	case "info":
		info, _ := (&baseServer{p: p}).Info(context.Background(), nil)
		info.Pid = 0 // no process serves; this one only prints
		b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true, UseProtoNames: true}.Marshal(info)
		if err != nil {
			logger.Error("encode info", "error", err)
			return 1
		}
		fmt.Fprintln(stdout, string(b))
		return 0
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		def := os.Getenv("PLOYZ_PLUGIN_SOCKET")
		if def == "" {
			def = DefaultSocket(p.Name)
		}
		socket := fs.String("socket", def, "unix socket to serve on; the reattach record is written beside it")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		announce(p, logger)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		if err := ServeLongLived(ctx, p, *socket, logger); err != nil {
			logger.Error("long-lived serve failed", "error", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "usage: ployz-%s [serve [--socket PATH] | info | --version]\n", p.Name)
		return 2
	}
}

// announce logs what the plugin serves, and says plainly when it is nothing.
func announce(p *Plugin, logger hclog.Logger) {
	if len(p.Capabilities) == 0 {
		logger.Warn("this plugin serves no capability yet; it answers only Info and Configure",
			"version", p.Version, "kind", p.Kind)
		return
	}
	logger.Info("plugin starting", "version", p.Version, "kind", p.Kind, "capabilities", p.Capabilities)
}

// NewLogger returns the JSON hclog logger plugins log with. It writes to
// stderr, which a managed plugin's host parses line by line and which
// systemd's journal collects for a long-lived one. PLOYZ_PLUGIN_LOG_LEVEL
// sets the level (default info).
func NewLogger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("PLOYZ_PLUGIN_LOG_LEVEL"))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      level,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}
