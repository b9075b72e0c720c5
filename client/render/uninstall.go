package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/footprint"
)

// HostOutcome prints what `machine reset` or `machine uninstall` did: how
// the Machine stands with the Cluster, then one row per footprint item
// that was not already absent, and a summary line.
func HostOutcome(w io.Writer, o client.HostOutcome) error {
	who := o.Host
	if o.Machine != "" {
		who = fmt.Sprintf("machine %s", o.Machine)
	}
	fmt.Fprintf(w, "%s: cluster %s\n", who, clusterWords(o.Cluster))
	if o.Items == nil {
		return nil
	}
	if o.Nothing() {
		_, err := fmt.Fprintf(w, "nothing to remove on %s: no Ployz footprint found (%d kept: volume data)\n", o.Host, o.Kept)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATE\tKIND\tITEM\tFOUND\tERROR")
	for _, r := range o.Items {
		if r.State == footprint.Absent {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.State, r.Kind, r.Name, strings.Join(r.Found, " "), r.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%d removed, %d kept, %d failed, %d would be removed\n",
		o.Removed, o.Kept, o.Failed, footprint.Count(o.Items, footprint.WouldRemove)); err != nil {
		return err
	}
	if o.ConnectionRemoved {
		_, err := fmt.Fprintf(w, "removed %s from this context's connections\n", o.Host)
		return err
	}
	return nil
}

func clusterWords(c string) string {
	switch c {
	case client.ClusterLeft:
		return "left (removed from the Cluster, reset)"
	case client.ClusterEnded:
		return "ended (it was the only Machine; reset)"
	case client.ClusterNotMember:
		return "none (not a member of a Cluster)"
	case client.ClusterWouldLeft:
		return "would leave (dry run)"
	case client.ClusterResetFail:
		return "forgotten by the Cluster, but its reset failed"
	}
	return c
}
