package render

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/rpc"
)

// Inspection describes a Machine as it sees itself: identity, network,
// labels and capabilities, then its plugins.
func Inspection(out io.Writer, in rpc.Inspection) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "id\t%s\nname\t%s\nphase\t%s\nsubnet\t%s\nmanagement\t%s\nendpoints\t%s\nversion\t%s\n",
		in.ID, in.Name, in.Phase, in.Subnet, in.ManagementIP, strings.Join(in.Endpoints, ", "), in.DaemonVersion)
	if len(in.Labels) > 0 {
		var ls []string
		for k, v := range in.Labels {
			ls = append(ls, k+"="+v)
		}
		sort.Strings(ls)
		fmt.Fprintf(w, "labels\t%s\n", strings.Join(ls, ", "))
	}
	fmt.Fprintf(w, "capabilities\t%s\n", strings.Join(in.Capabilities, ", "))
	fmt.Fprintf(w, "isolation\t%s\n", isolationLine(in.Isolation))
	if len(in.StoreEventsDropped) > 0 {
		// Duplicate or out-of-order store changes its subscriptions
		// dropped: none in a healthy Cluster, so worth a line when any.
		fmt.Fprintf(w, "store events dropped\t%s (duplicate or out of order; see the daemon's log)\n", droppedByTable(in.StoreEventsDropped))
	}
	if err := w.Flush(); err != nil || len(in.Plugins) == 0 {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PLUGIN\tVERSION\tAPI\tLIFECYCLE\tHEALTH\tPID\tDIGEST\tCAPABILITIES")
	for _, p := range in.Plugins {
		health := p.Health
		if p.Error != "" {
			health += " (" + p.Error + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", p.Name, p.Version, p.APIVersion, p.Lifecycle, health, p.Pid, shortID(p.SHA256), strings.Join(p.Capabilities, ","))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// A plugin process's own subscriptions (DNS, ingress) count apart.
	for _, p := range in.Plugins {
		if len(p.StoreEventsDropped) > 0 {
			fmt.Fprintf(out, "plugin %s dropped store events: %s (duplicate or out of order; see its log)\n", p.Name, droppedByTable(p.StoreEventsDropped))
		}
		if p.RefusedContainerRows > 0 {
			fmt.Fprintf(out, "plugin %s refuses %d containers rows: their Machine cannot vouch for the address (forged or stray; see its log)\n", p.Name, p.RefusedContainerRows)
		}
	}
	return nil
}

// isolationLine says which namespace isolation rules the Machine's
// kernel enforces.
func isolationLine(v *rpc.IsolationView) string {
	switch {
	case v == nil:
		return "none (a daemon before isolation, or forwarding not set up: see its log)"
	case v.Generation == 0 && v.Error == "":
		return "starting: the rules restored at start hold until the store is read"
	}
	s := fmt.Sprintf("generation %d, changed %s: %d networks, %d addresses", v.Generation, v.ChangedAt, v.Networks, v.Addresses)
	if v.Error != "" {
		s += "; last change failed (the rules before hold): " + v.Error
	}
	return s
}

// droppedByTable lists dropped store events as "table n", by table.
func droppedByTable(m map[string]int64) string {
	ds := make([]string, 0, len(m))
	for table, n := range m {
		ds = append(ds, fmt.Sprintf("%s %d", table, n))
	}
	sort.Strings(ds)
	return strings.Join(ds, ", ")
}

// Machines is the table of the Machines the entry observes, by name;
// who observed them and when, and each machines row the observer refused,
// go to errw.
func Machines(out, errw io.Writer, list rpc.MachineList) error {
	fmt.Fprintf(errw, "observed by %s at %s\n", list.ObserverName, list.ObservedAt.Format("15:04:05"))
	ms := slices.Clone(list.Machines)
	sort.SliceStable(ms, func(i, j int) bool {
		return ms[i].Name < ms[j].Name || ms[i].Name == ms[j].Name && ms[i].ID < ms[j].ID
	})
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tID\tSUBNET\tMANAGEMENT\tPHASE\tACCEPTS\tMEMBERSHIP\tRTT\tROW\tVERSION")
	var refused []rpc.MachineView
	for _, m := range ms {
		rtt := "-"
		if m.RTTMillis > 0 {
			rtt = fmt.Sprintf("%.1fms", m.RTTMillis)
		}
		row := m.Trust
		if row == "" {
			row = "-"
		}
		if m.Trust == "refused" {
			refused = append(refused, m)
		}
		ver := m.Version
		if ver == "" {
			ver = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, shortID(m.ID), m.Subnet, m.ManagementIP, m.Phase, client.Accepts(m.Labels), m.Membership, rtt, row, ver)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, m := range refused {
		fmt.Fprintf(errw, "machines row of %s (%s) refused by %s: %s; it acts on the last row it accepted, if any\n",
			m.Name, shortID(m.ID), list.ObserverName, m.TrustReason)
	}
	return nil
}

// Membership is each member's address, state and round-trip time.
func Membership(out io.Writer, ms rpc.Membership) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tID\tADDRESS\tSTATE\tRTT")
	for _, m := range ms.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%.2fms\n", m.MachineName, shortID(m.MachineID), m.Addr, m.State, m.RTTMillis)
	}
	return w.Flush()
}
