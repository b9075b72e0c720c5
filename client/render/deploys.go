package render

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/core/deploy"
)

// Deploys is the table of recorded Deploys, newest first: each one's
// status (a running one whose CLI went quiet says since when) and every
// Machine's status with the steps in flight there; a record this version
// cannot read is a warning.
func Deploys(w io.Writer, recs []deploy.Record, unreadable []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEPLOYMENT\tNAMESPACE\tREVISION\tSTATUS\tSTARTED\tMACHINES")
	for _, r := range recs {
		status := r.Status
		if r.Stale {
			status += " (no word from its CLI since " + r.UpdatedAt.Local().Format(time.TimeOnly) + ")"
		}
		var ms []string
		for _, m := range r.Machines {
			s := m.Machine + " " + m.Status
			if len(m.InFlight) > 0 {
				s += ": " + strings.Join(m.InFlight, ", ")
			}
			ms = append(ms, s)
		}
		sort.Strings(ms)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.DeploymentID, r.Namespace, r.Revision, status, r.StartedAt.Local().Format(time.DateTime), strings.Join(ms, "; "))
	}
	tw.Flush()
	for _, id := range unreadable {
		fmt.Fprintf(w, "warning: the record of deploy %s is unreadable by this version\n", id)
	}
}
