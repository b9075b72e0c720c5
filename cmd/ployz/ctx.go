package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// ctxCommand is `ployz ctx`: the operator's contexts, each a Cluster and
// the connections that reach it.
func ctxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ctx", Short: "Manage contexts: which Cluster commands talk to, and how"}
	ls := &cobra.Command{
		Use: "ls", Short: "List contexts", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withStore(func(st *operator.Store) error {
				all, err := st.Contexts()
				return show(c, append([]operator.Context{}, all...), err, func(w io.Writer) error { return render.Contexts(w, all) })
			})
		},
	}
	use := &cobra.Command{
		Use: "use NAME", Short: "Select the current context", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(func(st *operator.Store) error { return st.Use(args[0]) })
		},
	}
	show := &cobra.Command{
		Use: "show [NAME]", Short: "Show a context and its connections (default: the one commands use)", Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(func(st *operator.Store) error {
				x, err := contextNamed(st, args)
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
			return withStore(func(st *operator.Store) error { return st.RemoveContext(args[0]) })
		},
	}
	cmd.AddCommand(ls, use, show, rm, ctxExport(), ctxImport(), ctxOperator(), ctxRelease())
	return cmd
}

// contextNamed is the context NAME names, else the one the other
// commands use: --context, else PLOYZ_CONTEXT's, else the current one.
func contextNamed(st *operator.Store, args []string) (operator.Context, error) {
	name := g.context
	if len(args) == 1 {
		name = args[0]
	}
	return operator.Resolve(st, name)
}

// ctxExport prints a context for a teammate or a CI job: connections and
// pinned host keys, never a private key.
func ctxExport() *cobra.Command {
	return &cobra.Command{
		Use:   "export [NAME]",
		Short: "Print a context (connections, pinned SSH host keys; no private key) for `ctx import` or PLOYZ_CONTEXT",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withStore(func(st *operator.Store) error {
				x, err := contextNamed(st, args)
				if err != nil {
					return err
				}
				e, err := operator.ExportContext(x, rpc.HostKeys{Path: operator.KnownHostsPath()})
				return orJSON(c, e, err)
			})
		},
	}
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
			e, err := operator.ParseExport(b)
			if err != nil {
				return err
			}
			if name != "" {
				e.Name = name
			}
			if err := withStore(func(st *operator.Store) error {
				return st.Import(e, rpc.HostKeys{Path: operator.KnownHostsPath()}, replace, use)
			}); err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "imported context %s: %d connections, %d host keys pinned\n", e.Name, len(e.Connections), len(e.HostKeys))
			return nil
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
