package render

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/core/volumes"
)

// VolumeEvent prints a Volume Run's events as lines: steps indented under
// the run, progress within a step further.
func VolumeEvent(w io.Writer) func(volumerun.Event) {
	return func(e volumerun.Event) {
		switch e.Kind {
		case volumerun.EventStep:
			fmt.Fprintf(w, "  %-14s %-8s %s\n", e.Step, e.Machine, e.Text)
		case volumerun.EventProgress:
			fmt.Fprintf(w, "    %s\n", e.Text)
		case volumerun.EventNote:
			fmt.Fprintf(w, "  %s\n", e.Text)
		case volumerun.EventWarning:
			fmt.Fprintf(w, "warning: %s\n", e.Text)
		default:
			fmt.Fprintln(w, e.Text)
		}
	}
}

// VolumeRunEnd is the line a run command ends with: the run's state, or
// why no run was needed; nothing when it was refused before a run opened.
func VolumeRunEnd(w io.Writer, res volumerun.Result) {
	switch {
	case res.Nothing != nil:
		fmt.Fprintln(w, res.Nothing.Message)
	case res.Run != nil:
		r := res.Run
		fmt.Fprintf(w, "volume %s: %s run gen %d %s\n", r.Volume, r.Kind, r.Gen, r.State)
	}
}

// VolumeRuns is the table of recorded Volume Runs, with who drove each.
func VolumeRuns(w io.Writer, runs []operator.VolumeRun) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VOLUME\tGEN\tKIND\tTARGET\tSTATE\tSTARTED\tSTEPS\tOPERATOR")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Volume, r.Gen, r.Kind, r.Target, r.State, r.Started.Local().Format(time.DateTime), len(r.Steps), cmp.Or(r.Operator, "-"))
	}
	return tw.Flush()
}

// VolumeList prints every Machine's volumes, then a note per Machine that
// has no pool or did not answer (volumes.MachineVolumes.Note).
func VolumeList(w io.Writer, ms []volumes.MachineVolumes) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tNAME\tCOPY\tSIZE\tUSED\tSNAPSHOTS\tMOUNTPOINT")
	var notes []string
	for _, m := range ms {
		if n := m.Note(); n != "" {
			notes = append(notes, m.Machine+": "+n)
		}
		if m.List == nil {
			continue
		}
		for _, v := range m.List.Volumes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", m.Machine, v.Name, volumerun.Role(v), sizeOrNone(v.SizeBytes), units.BytesSize(float64(v.UsedBytes)), len(v.Snapshots), v.Mountpoint)
		}
	}
	tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
}

func sizeOrNone(n uint64) string {
	if n == 0 {
		return "none"
	}
	return units.BytesSize(float64(n))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Volume describes one Provisioned Volume on machine: dataset, size, its
// copy, snapshots and bookmarks.
func Volume(w io.Writer, machine string, v rpc.Volume) {
	fmt.Fprintf(w, "Volume %s on %s\n", v.Name, machine)
	fmt.Fprintf(w, "  dataset:     %s\n  mountpoint:  %s\n  size:        %s\n  used:        %s\n", v.Dataset, v.Mountpoint, sizeOrNone(v.SizeBytes), units.BytesSize(float64(v.UsedBytes)))
	if v.Created != 0 {
		fmt.Fprintf(w, "  created:     %s\n", time.Unix(0, v.Created).UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "  readonly:    %s\n", onOff(v.ReadOnly))
	if v.Copy != nil {
		fmt.Fprintf(w, "  copy:        %s", v.Copy.Role)
		if v.Copy.Epoch != 0 {
			fmt.Fprintf(w, " (writer epoch %d)", v.Copy.Epoch)
		}
		if v.Copy.Floor != 0 {
			fmt.Fprintf(w, ", run floor gen %d", v.Copy.Floor)
		}
		fmt.Fprintln(w)
	}
	if v.ResumeToken != "" {
		fmt.Fprintf(w, "  resume token: %s (an interrupted receive; `ployz volume send --resume-token` continues it)\n", v.ResumeToken)
	}
	if len(v.Snapshots) == 0 {
		fmt.Fprintln(w, "  snapshots:   none")
	} else {
		fmt.Fprintln(w, "  snapshots:")
	}
	for _, sn := range v.Snapshots {
		fmt.Fprintf(w, "    %s  %s  used %s  guid %s\n", sn.Name, time.Unix(0, sn.Created).UTC().Format(time.RFC3339), units.BytesSize(float64(sn.UsedBytes)), sn.GUID)
	}
	if len(v.Bookmarks) > 0 {
		fmt.Fprintln(w, "  bookmarks:   (pruned run snapshots: incremental bases)")
	}
	for _, b := range v.Bookmarks {
		fmt.Fprintf(w, "    %s  %s  guid %s\n", b.Name, time.Unix(0, b.Created).UTC().Format(time.RFC3339), b.GUID)
	}
}

// Protection describes a volume's automatic snapshots (x-volume) and
// each Mirror's lag, from the Cluster's record of runs.
func Protection(w io.Writer, p volumerun.Protection) {
	if l := p.SnapshotsLine(); l != "" {
		fmt.Fprintf(w, "  scheduled:   %s\n", l)
	}
	for _, m := range p.Mirrors {
		fmt.Fprintf(w, "  %s\n", m)
	}
	// A scheduled run that ended well shows as the lag above; one that
	// did not is said, with its error.
	if r := p.NotDone(); r != nil {
		fmt.Fprintf(w, "  %s\n", r)
	}
}

// VolumeSnapshots lists a volume's snapshots (`ployz volume snapshot
// ls`), oldest first: creation time, the space each alone holds, and
// what the volume's x-volume retention does with it: kept (by which
// rules), pruned at the next round, or never pruned (not automatic).
func VolumeSnapshots(w io.Writer, machine string, s rpc.VolumeSnapshots) {
	role := "?"
	if s.Copy != nil {
		role = s.Copy.Role
	}
	ret := "none declared (x-volume snapshots)"
	if s.Retention != nil {
		ret = RetentionString(*s.Retention)
	}
	if s.Note != "" {
		ret = s.Note
	}
	fmt.Fprintf(w, "Volume %s on %s (%s); retention: %s\n", s.Volume, machine, role, ret)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SNAPSHOT\tCREATED\tUSED\tRETENTION")
	for _, sn := range s.Snapshots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", sn.Name, time.Unix(0, sn.Created).UTC().Format(time.RFC3339), units.BytesSize(float64(sn.UsedBytes)), snapshotFate(sn, s.Retention != nil))
	}
	tw.Flush()
	if len(s.Snapshots) == 0 {
		fmt.Fprintln(w, "(no snapshots)")
	}
}

// snapshotFate is what retention does with sn (under is whether the
// volume declares one).
func snapshotFate(sn rpc.VolumeSnapshotInfo, under bool) string {
	switch {
	case !sn.Auto:
		return "not automatic: never pruned"
	case !under:
		return "automatic, no retention: not pruned"
	case sn.Kept:
		return "kept (" + strings.Join(sn.Rules, ", ") + ")"
	}
	return "pruned at the next round"
}

// RetentionString is r as x-volume declares it: "hourly 24, daily 7".
func RetentionString(r volprotect.Retention) string {
	var parts []string
	for _, c := range []struct {
		k string
		n int
	}{{"hourly", r.Hourly}, {"daily", r.Daily}, {"weekly", r.Weekly}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c.k, c.n))
		}
	}
	return strings.Join(parts, ", ")
}
