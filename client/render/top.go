package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/observe"
)

// Top prints rows as a table; maxRows > 0 keeps the first (busiest) ones
// and says how many were left out.
func Top(w io.Writer, rows []observe.TopRow, maxRows int) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tCONTAINER\tNAMESPACE\tSERVICE\tCPU\tMEMORY")
	shown := rows
	if maxRows > 0 && len(rows) > maxRows {
		shown = rows[:maxRows-1]
	}
	for _, r := range shown {
		cpu, mem := "-", "-"
		if r.CPU != nil {
			cpu = fmt.Sprintf("%.1f%%", *r.CPU*100)
		}
		if r.Memory != nil {
			mem = MetricValue("mem.bytes", *r.Memory)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Container, r.Namespace, r.Service, cpu, mem)
	}
	tw.Flush()
	if len(shown) < len(rows) {
		fmt.Fprintf(w, "… %d more Containers (a taller terminal shows them)\n", len(rows)-len(shown))
	}
}

// TopFrame is one screen of the live view for a terminal of height lines
// (0: unknown): a header (when the sample was taken, the pace, the
// Machines that did not answer or the error of the whole refresh), then
// the busiest rows that fit.
func TopFrame(s client.TopSample, every time.Duration, height int) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "ployz top — %s — every %s — q or Ctrl-C quits\n", s.At.Format("15:04:05"), every)
	if s.Err != nil {
		fmt.Fprintf(&b, "refresh failed: %v\n", s.Err)
	}
	if len(s.Failed) > 0 {
		names := make([]string, 0, len(s.Failed))
		for _, f := range s.Failed {
			names = append(names, f.Machine)
		}
		fmt.Fprintf(&b, "no answer from %s:\n", strings.Join(names, ", "))
		for _, f := range s.Failed {
			fmt.Fprintf(&b, "  %s: %s\n", f.Machine, f.Error)
		}
	}
	b.WriteString("\n")
	maxRows := 0
	if height > 0 {
		maxRows = max(height-strings.Count(b.String(), "\n")-1, 2)
	}
	Top(&b, s.Rows, maxRows)
	return b.String()
}
