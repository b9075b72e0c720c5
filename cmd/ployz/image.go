package main

import (
	"io"
	"os"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/images"
)

// imageCommand is `ployz image`: images reach Machines without a registry.
func imageCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Deliver images to Machines without a registry"}
	var machines []string
	push := &cobra.Command{
		Use:   "push IMAGE",
		Short: "Stream a local image into the Docker of every Machine that misses it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				res, err := s.PushImage(c.Context(), args[0], machines, pushProgress())
				return showPartial(c, res, err, g.json, func(w io.Writer) error { render.DeliveryTable(w, res); return nil })
			})
		},
	}
	push.Flags().StringSliceVarP(&machines, "machine", "m", nil, "target Machine (repeatable; default: every Machine)")
	cmd.AddCommand(push)
	return cmd
}

// pushProgress draws one byte bar per Machine on a terminal.
func pushProgress() images.Progress {
	if !term.IsTerminal(int(os.Stderr.Fd())) || g.json {
		return nil
	}
	bars := map[string]*progressbar.ProgressBar{}
	var mu sync.Mutex // Machines receive in parallel
	return func(machine string, sent, total int64) {
		mu.Lock()
		defer mu.Unlock()
		b, ok := bars[machine]
		if !ok || b.GetMax64() != total { // a new image
			b = progressbar.DefaultBytes(total, "pushing to "+machine)
			bars[machine] = b
		}
		b.Set64(sent) // display only
	}
}

// buildCommand is `ployz build [SERVICE…] [--push]`: build the compose
// file's build: Services with this computer's Docker, tagged by content;
// --push also delivers them to every Machine that lacks them.
func buildCommand() *cobra.Command {
	var f projectFlags
	var b client.Build
	var push bool
	cmd := &cobra.Command{
		Use:   "build [SERVICE...]",
		Short: "Build the compose file's build: Services with this computer's Docker",
		RunE: func(c *cobra.Command, names []string) error {
			app, err := client.LoadCompose(c.Context(), f.file, f.project, f.env)
			if err != nil {
				return err
			}
			b.Names, b.Log, b.Output = names, c.ErrOrStderr(), buildLog(c.ErrOrStderr())
			if !push {
				res, err := client.BuildCompose(c.Context(), nil, app, b, nil)
				return printBuilt(c, res, err)
			}
			return withClient(c, func(s *client.Session) error {
				res, err := client.BuildCompose(c.Context(), s, app, b, pushProgress())
				return printBuilt(c, res, err)
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringArrayVar(&b.Args, "build-arg", nil, "KEY=VALUE build argument for every build: Service (repeatable)")
	cmd.Flags().BoolVar(&push, "push", false, "build for the Machines' platform and deliver to every Machine that lacks the image, without deploying")
	return cmd
}

// printBuilt prints each built Service's tag and, after --push, each
// Machine's delivery (--json: the tags alone, or with the deliveries); a
// Machine that did not get an image exits 3.
func printBuilt(c *cobra.Command, res client.BuiltImages, err error) error {
	var doc any = res.Images
	if res.Deliveries != nil {
		doc = struct {
			Images     map[string]string `json:"images"`
			Deliveries []images.Result   `json:"deliveries"`
		}{res.Images, res.Deliveries}
	}
	return showPartial(c, doc, err, g.json, func(w io.Writer) error { render.BuiltImages(w, res); return nil })
}

// buildLog is where build output goes: the terminal, unless --json
// (a failure carries Docker's error either way).
func buildLog(w io.Writer) io.Writer {
	if g.json {
		return nil
	}
	return w
}
