package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/client"
)

// Certificates prints `ployz cert ls`: one line per certificate, its
// expiry warning in the last column.
func Certificates(out io.Writer, cs client.Certificates) error {
	if len(cs.Certificates) == 0 {
		_, err := fmt.Fprintln(out, "no certificates")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSOURCE\tNAMES\tISSUER\tNOT AFTER\tWARNING")
	for _, c := range cs.Certificates {
		id := c.ID
		if id == "" {
			id = "-"
		}
		notAfter := "-"
		if c.NotAfter > 0 {
			notAfter = time.Unix(c.NotAfter, 0).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", id, c.Source, strings.Join(c.Names, ","), dash(c.Issuer), notAfter, c.Warning)
	}
	return w.Flush()
}
