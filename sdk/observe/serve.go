package observe

import (
	"bytes"
	"context"
	"io"

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
