package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
)

// ctxCommand is `ployz ctx`: the operator's contexts, each a Cluster and
// the connections that reach it.
func ctxCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ctx", Short: "Manage contexts: which Cluster commands talk to, and how"}
	ls := &cobra.Command{
		Use: "ls", Short: "List contexts", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			st, err := openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			all, err := st.Contexts()
			if err != nil {
				return err
			}
			if g.json {
				if all == nil {
					all = []operator.Context{}
				}
				return printJSON(c.OutOrStdout(), all)
			}
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "CURRENT\tNAME\tCONNECTIONS")
			for _, x := range all {
				cur := ""
				if x.Current {
					cur = "*"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\n", cur, x.Name, len(x.Connections))
			}
			return w.Flush()
		},
	}
	use := &cobra.Command{
		Use: "use NAME", Short: "Select the current context", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			return st.Use(args[0])
		},
	}
	show := &cobra.Command{
		Use: "show [NAME]", Short: "Show a context and its connections", Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			var x operator.Context
			if len(args) == 1 {
				x, err = st.Context(args[0])
			} else {
				x, err = st.Current()
			}
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), x)
			}
			fmt.Fprintf(c.OutOrStdout(), "context %s (network %s)\n", x.Name, x.Network)
			for i, conn := range x.Connections {
				fmt.Fprintf(c.OutOrStdout(), "  %d. %s\n", i+1, conn.URL)
			}
			return nil
		},
	}
	rm := &cobra.Command{
		Use: "rm NAME", Short: "Remove a context (its allocation history is kept)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			st, err := openStore()
			if err != nil {
				return err
			}
			defer st.Close()
			return st.RemoveContext(args[0])
		},
	}
	cmd.AddCommand(ls, use, show, rm)
	return cmd
}
