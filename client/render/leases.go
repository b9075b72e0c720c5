package render

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Leases is `ployz lease ls`: one line per live lease, times in UTC.
func Leases(out io.Writer, ls []rpc.Lease) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tHOLDER\tCOMMAND\tSINCE\tEXPIRES")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", l.Scope, l.Holder.Name, l.Command,
			time.UnixMilli(l.Started).UTC().Format(time.RFC3339), time.UnixMilli(l.Expires).UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
