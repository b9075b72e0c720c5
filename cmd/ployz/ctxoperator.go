package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
)

// ctxOperatorResult is `ployz ctx operator --json`.
type ctxOperatorResult struct {
	Context string `json:"context"`
	Name    string `json:"name"`
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
			if reset && len(args) == 1 {
				return fmt.Errorf("--reset: takes no NAME")
			}
			return withStore(func(st *operator.Store) error {
				x, err := operator.Resolve(st, g.context)
				if err != nil {
					return err
				}
				switch {
				case reset:
					err = st.SetOperatorName(x.Name, "")
				case len(args) == 1:
					err = st.SetOperatorName(x.Name, args[0])
				}
				if err != nil {
					return err
				}
				name, err := st.OperatorName(x.Name)
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), ctxOperatorResult{Context: x.Name, Name: name})
				}
				fmt.Fprintln(c.OutOrStdout(), name)
				if v := strings.TrimSpace(os.Getenv(operator.EnvOperator)); v != "" && (reset || len(args) == 1) {
					fmt.Fprintf(c.ErrOrStderr(), "note: %s=%s overrides the saved name while it is set\n", operator.EnvOperator, v)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&reset, "reset", false, "go back to the default name (user@host)")
	return cmd
}
