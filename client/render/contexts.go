package render

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/ployz/ployz/core/operator"
)

// Contexts is `ployz ctx ls`: one line per context, the current one starred.
func Contexts(out io.Writer, all []operator.Context) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CURRENT\tNAME\tCONNECTIONS")
	for _, x := range all {
		cur := ""
		if x.Current {
			cur = "*"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\n", cur, x.Name, len(x.Connections))
	}
	return w.Flush()
}

// Context is `ployz ctx show`: the context and its connections in order.
func Context(out io.Writer, x operator.Context) {
	fmt.Fprintf(out, "context %s (network %s)\n", x.Name, x.Network)
	for i, conn := range x.Connections {
		fmt.Fprintf(out, "  %d. %s\n", i+1, conn.URL)
	}
}
