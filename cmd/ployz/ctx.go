package main

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/operator"
)

// ctxCommand is `ployz ctx`: the operator's contexts, each a Cluster and
// the connections that reach it.
func ctxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ctx", Short: "Manage contexts: which Cluster commands talk to, and how"}
	ls := &cobra.Command{
		Use: "ls", Short: "List contexts", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withContexts(func(cs *client.Contexts) error {
				all, err := cs.List()
				return show(c, all, err, func(w io.Writer) error { return render.Contexts(w, all) })
			})
		},
	}
	use := &cobra.Command{
		Use: "use NAME", Short: "Select the current context", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withContexts(func(cs *client.Contexts) error { return cs.Use(args[0]) })
		},
	}
	show := &cobra.Command{
		Use: "show [NAME]", Short: "Show a context and its connections (default: the one commands use)", Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withContexts(func(cs *client.Contexts) error {
				x, err := cs.Named(strings.Join(args, ""))
				if err != nil || g.json {
					return orJSON(c, x, err)
				}
				render.Context(c.OutOrStdout(), x)
				return nil
			})
		},
	}
	rm := &cobra.Command{
		Use: "rm NAME", Short: "Remove a context (its allocation history is kept)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withContexts(func(cs *client.Contexts) error { return cs.Remove(args[0]) })
		},
	}
	export := &cobra.Command{
		Use:   "export [NAME]",
		Short: "Print a context (connections, pinned SSH host keys; no private key) for `ctx import` or PLOYZ_CONTEXT",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withContexts(func(cs *client.Contexts) error {
				e, err := cs.Export(strings.Join(args, ""))
				return orJSON(c, e, err)
			})
		},
	}
	cmd.AddCommand(ls, use, show, rm, export, ctxImport(), ctxOperator(), ctxRelease())
	return cmd
}

// ctxImport saves an exported context here and pins its host keys; a pin
// this computer already holds for another key is refused, not replaced.
func ctxImport() *cobra.Command {
	var name string
	var replace, use bool
	cmd := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Save a context from `ctx export` (standard input without FILE) and pin its SSH host keys",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			b, err := readInput(c, args)
			if err != nil {
				return err
			}
			return withContexts(func(cs *client.Contexts) error {
				e, err := cs.Import(b, name, replace, use)
				if err == nil {
					fmt.Fprintf(c.ErrOrStderr(), "imported context %s: %d connections, %d host keys pinned\n", e.Name, len(e.Connections), len(e.HostKeys))
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "import under this name instead of the exported one")
	cmd.Flags().BoolVar(&replace, "replace", false, "replace a context of the same name")
	cmd.Flags().BoolVar(&use, "use", false, "select the imported context")
	return cmd
}

// readInput reads FILE, or standard input for none or "-".
func readInput(c *cobra.Command, args []string) ([]byte, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.ReadAll(c.InOrStdin())
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", args[0], err)
	}
	return b, nil
}

// ctxOperator shows or sets the operator name the context's records
// carry (the history names it with the SSH key's fingerprint).
func ctxOperator() *cobra.Command {
	var reset bool
	cmd := &cobra.Command{
		Use:   "operator [NAME]",
		Short: "Show or set the operator name this context's operations are recorded under (default user@host)",
		Long: `Show the operator name the Cluster's history records this context's operations
under, or set it (NAME) or go back to the default (--reset): user@host.
` + operator.EnvOperator + ` overrides it for every context (a CI job names itself there).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var set *string
			if len(args) == 1 {
				set = &args[0]
			}
			return withContexts(func(cs *client.Contexts) error {
				o, err := cs.OperatorName(set, reset)
				return show(c, o, err, func(w io.Writer) error {
					fmt.Fprintln(w, o.Name)
					if o.Overridden != "" {
						fmt.Fprintf(c.ErrOrStderr(), "note: %s=%s overrides the saved name while it is set\n", operator.EnvOperator, o.Overridden)
					}
					return nil
				})
			})
		},
	}
	cmd.Flags().BoolVar(&reset, "reset", false, "go back to the default name (user@host)")
	return cmd
}

// ctxRelease is `ployz ctx release`: show or set where a context takes
// Ployz releases from.
func ctxRelease() *cobra.Command {
	var upd client.ReleaseUpdate
	cmd := &cobra.Command{
		Use:   "release [NAME]",
		Short: "Show or set the release source and channel a context installs and upgrades Ployz from",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withContexts(func(cs *client.Contexts) error {
				r, err := cs.Release(strings.Join(args, ""), upd)
				return show(c, r, err, func(w io.Writer) error {
					if r.Source == "" {
						_, err := fmt.Fprintf(w, "context %s: no release source (installs use the bundle beside the CLI)\n", r.Context)
						return err
					}
					_, err := fmt.Fprintf(w, "context %s: release source %s, channel %s\n", r.Context, r.Source, cmp.Or(r.Channel, client.DefaultChannel))
					return err
				})
			})
		},
	}
	cmd.Flags().StringVar(&upd.Source, "release-source", "", "release source (URL or directory) to save")
	cmd.Flags().StringVar(&upd.Channel, "channel", "", "channel to save")
	cmd.Flags().BoolVar(&upd.Clear, "clear", false, "remove the saved setting (before applying the flags)")
	return cmd
}
