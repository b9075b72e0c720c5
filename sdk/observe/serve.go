package observe

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk"
)

// Configure returns an sdk.Plugin Configure function for an Observe Store
// plugin: an empty config changes nothing; any other must parse as a
// Spec and is kept at specPath (nothing kept when specPath is empty, as
// for `info`).
func Configure(specPath string) func(context.Context, uint32, []byte) error {
	return func(_ context.Context, _ uint32, config []byte) error {
		if t := bytes.TrimSpace(config); len(t) == 0 || string(t) == "null" {
			return nil
		}
		if _, err := ParseSpec(config); err != nil {
			return err
		}
		if specPath == "" {
			return nil
		}
		_, err := sdk.KeepConfig(specPath, config)
		return err
	}
}

// Serve is the `serve [--socket PATH] [--spec PATH]` command of an
// Observe Store plugin: its socket answers at once and run works in the
// foreground until ctx ends, or returns nil when its spec changed so the
// unit starts it again on the new one.
func Serve(name, specPath string, plugin func(specPath string) *sdk.Plugin,
	run func(ctx context.Context, specPath string, log hclog.Logger) error, args []string, stderr io.Writer) int {
	return sdk.ServeDataPlane(sdk.DataPlane{
		Name:     name,
		SpecPath: specPath,
		Plugin:   plugin,
		Serve: func(ctx context.Context, specPath string, _ <-chan error, log hclog.Logger) int {
			if err := run(ctx, specPath, log); err != nil {
				log.Error(name, "error", err)
				return 1
			}
			return 0
		},
	}, args, stderr)
}

// Main is an Observe Store plugin's command line: `serve ...` runs serve;
// no argument is managed mode, which serves nothing (a managed child has
// nothing to keep across restarts); `info` and `--version` describe what
// `serve` advertises. describe(true) is the serving description.
func Main(args []string, describe func(serving bool) *sdk.Plugin, serve func(args []string) int) int {
	if len(args) > 0 && args[0] == "serve" {
		return serve(args[1:])
	}
	sdk.Main(describe(len(args) > 0))
	return 0
}

// SpecWatch notices that the spec kept at a path changed from the one a
// plugin runs on; the plugin then returns from its run so that systemd
// starts it again on the new one.
type SpecWatch struct {
	path    string
	running Spec
	seen    os.FileInfo
}

// WatchSpec starts watching path against the spec running.
func WatchSpec(path string, running Spec) *SpecWatch {
	fi, _ := os.Stat(path)
	return &SpecWatch{path: path, running: running, seen: fi}
}

// Changed reports whether the file now holds a valid spec other than the
// running one.
func (w *SpecWatch) Changed() bool {
	fi, err := os.Stat(w.path)
	if err != nil || (w.seen != nil && fi.ModTime().Equal(w.seen.ModTime()) && fi.Size() == w.seen.Size()) {
		return false
	}
	w.seen = fi
	ns, err := LoadSpec(w.path)
	return err == nil && ns != w.running
}
