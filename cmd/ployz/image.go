package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/deploy"
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
				res, err := images.Push(c.Context(), s.Entry(), args[0], machines, pushProgress())
				if err != nil {
					return err
				}
				if g.json {
					if err := printJSON(c.OutOrStdout(), res); err != nil {
						return err
					}
				} else {
					render.DeliveryTable(c.OutOrStdout(), res)
				}
				if client.DeliveryFailed(res) {
					return &exitError{code: 3, err: fmt.Errorf("image %s did not reach every Machine", args[0]), silent: g.json}
				}
				return nil
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
	var args []string
	var push bool
	cmd := &cobra.Command{
		Use:   "build [SERVICE...]",
		Short: "Build the compose file's build: Services with this computer's Docker",
		RunE: func(c *cobra.Command, names []string) error {
			b, err := os.ReadFile(f.file)
			if err != nil {
				return fmt.Errorf("compose file: %w", err)
			}
			app, err := deploy.Load(c.Context(), deploy.Source{Compose: b, Filename: filepath.Base(f.file), WorkingDir: filepath.Dir(f.file),
				ProjectName: f.project, Environment: f.env, Env: client.Environ()})
			if err != nil {
				return err
			}
			if !push {
				if err := client.BuildApp(c.Context(), nil, &app, client.Build{Names: names, Args: args, Log: c.ErrOrStderr(), Output: buildLog(c.ErrOrStderr())}); err != nil {
					return err
				}
				return printBuilt(c, app, names, nil)
			}
			return withClient(c, func(s *client.Session) error {
				res, err := client.BuildAndPush(c.Context(), s.Entry(), &app, client.Build{Names: names, Args: args, Log: c.ErrOrStderr(), Output: buildLog(c.ErrOrStderr())}, pushProgress())
				if err != nil {
					return err
				}
				return printBuilt(c, app, names, res)
			})
		},
	}
	f.add(cmd, true)
	cmd.Flags().StringArrayVar(&args, "build-arg", nil, "KEY=VALUE build argument for every build: Service (repeatable)")
	cmd.Flags().BoolVar(&push, "push", false, "build for the Machines' platform and deliver to every Machine that lacks the image, without deploying")
	return cmd
}

// printBuilt prints each built Service's tag and, after --push, each
// Machine's delivery; a Machine that did not get an image exits 3.
func printBuilt(c *cobra.Command, app deploy.App, names []string, res []images.Result) error {
	tags := map[string]string{}
	for _, s := range client.Built(app, names) {
		tags[s.Name] = s.Spec.Image
		if !g.json {
			fmt.Fprintf(c.OutOrStdout(), "%s\t%s\n", s.Name, s.Spec.Image)
		}
	}
	if g.json {
		if res == nil {
			if err := printJSON(c.OutOrStdout(), tags); err != nil {
				return err
			}
		} else if err := printJSON(c.OutOrStdout(), struct {
			Images     map[string]string `json:"images"`
			Deliveries []images.Result   `json:"deliveries"`
		}{tags, res}); err != nil {
			return err
		}
	} else if res != nil {
		render.DeliveryTable(c.OutOrStdout(), res)
	}
	if client.DeliveryFailed(res) {
		return &exitError{code: 3, err: errors.New("an image did not reach every Machine"), silent: g.json}
	}
	return nil
}

// buildLog is where build output goes: the terminal, unless --json
// (a failure carries Docker's error either way).
func buildLog(w io.Writer) io.Writer {
	if g.json {
		return nil
	}
	return w
}
