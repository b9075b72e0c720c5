package render

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
)

// Services is the table of `ployz ls`: each Service's desired against
// running and ready Containers.
func Services(w io.Writer, rows []views.ServiceRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tSERVICE\tDESIRED\tRUNNING\tREADY\tCONTAINERS\tRESTARTS\tNOTE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Namespace, r.Service, r.Desired, r.Running, r.Ready, r.Total, r.Restarts, r.Note())
	}
	return tw.Flush()
}

// RemovalMarks notes each pending removal and the command that retries it.
func RemovalMarks(w io.Writer, marks []operator.Removal) {
	for _, m := range marks {
		fmt.Fprintf(w, "note: %s has a pending removal since %s; `ployz project rm %s --env %s` retries it\n",
			deploy.Namespace(m.Project, m.Environment), m.CreatedAt.Format("2006-01-02 15:04"), m.Project, m.Environment)
	}
}

// Containers is the table of `ployz ps`; a last exit is told relative
// to now.
func Containers(w io.Writer, rows []client.ContainerRow, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tNAMESPACE\tSERVICE\tCONTAINER\tSTATE\tHEALTH\tREADY\tRESTARTS\tLAST EXIT\tIP\tIMAGE")
	for _, r := range rows {
		health := r.Health
		if health == "" {
			health = "-"
		}
		state, last, image := r.State, LastExit(r.ContainerObservation, now), r.Image
		if r.Down {
			// Only the Serving Pointer speaks for it: no health, exit or
			// image name, and the state says why.
			state, last, image = r.State+" (Machine down)", "-", cmp.Or(r.ImageID, "-")
		}
		service := r.Service
		if r.Labels[rpc.LabelKind] == rpc.KindRun {
			service += " (run)" // a one-off `ployz run`, never a replica
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%t\t%d\t%s\t%s\t%s\n", r.Machine, r.Namespace, service, r.Name, state, health, r.Ready,
			r.RestartCount, last, cmp.Or(r.IP, "-"), image)
	}
	return tw.Flush()
}

// ServiceInspection describes a Service: its declaration, execution and
// ingress status, Serving Pointer and Containers (Machines named as the
// snapshot has them).
func ServiceInspection(w io.Writer, in client.Inspection, snap deploy.Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "service\t%s\nnamespace\t%s\nservice id\t%s\n", in.Service, in.Namespace, in.ServiceID)
	if d := in.Declared; d != nil {
		fmt.Fprintf(tw, "declared\t%s, replicas %d, image %s, readiness %s\n", d.Mode, d.Replicas, d.Image, d.Readiness)
	}
	e := in.Execution
	fmt.Fprintf(tw, "execution\t%s (desired %d, running %d, ready %d, restarts %d)\n", e.Status, e.Desired, e.Running, e.Ready, e.Restarts)
	if len(e.DownOn) > 0 {
		fmt.Fprintf(tw, "  on Down Machines\t%s (unreachable, left out of DNS and ingress; a deploy replaces them)\n", strings.Join(e.DownOn, ", "))
	}
	if len(e.NotReadyOn) > 0 {
		fmt.Fprintf(tw, "  not ready on\t%s\n", strings.Join(e.NotReadyOn, ", "))
	}
	for _, n := range in.Networks {
		fmt.Fprintf(tw, "network\t%s (shared with the Services of %s on it)", n.Name, strings.Join(n.Namespaces, ", "))
		if len(n.Aliases) > 0 {
			fmt.Fprintf(tw, "; aliases %s", strings.Join(n.Aliases, ", "))
		}
		fmt.Fprintln(tw)
	}
	serviceIngress(tw, in.Ingress)
	if sv := in.Serving; sv != nil {
		acked := 0
		for _, a := range sv.Acks {
			if a.Current(sv.Pointer) {
				acked++
			}
		}
		fmt.Fprintf(tw, "serving pointer\t%s (deployment %s, %d Container(s)), acked by %d of %d Machines", sv.Pointer, sv.Deployment, len(sv.Containers), acked, len(sv.Acks))
		if p := sv.Pending(); len(p) > 0 {
			fmt.Fprintf(tw, "; waiting for %s", strings.Join(p, ", "))
		}
		fmt.Fprintln(tw)
	}
	for _, co := range in.Containers {
		fmt.Fprintf(tw, "  container\t%s on %s: %s, ready %t, %s, restarts %d, last exit %s\n", co.Name, views.MachineName(snap, co.MachineID),
			co.State, co.Ready, co.IP, co.RestartCount, LastExit(co, now))
	}
	return tw.Flush()
}

// serviceIngress is an inspection's ingress status: routes declared and
// each Machine's state of them.
func serviceIngress(w io.Writer, ing client.IngressStatus) {
	if ing.Reason != "" {
		fmt.Fprintf(w, "ingress\t%s (%s)\n", ing.Status, ing.Reason)
	} else {
		fmt.Fprintf(w, "ingress\t%s\n", ing.Status)
	}
	for _, r := range ing.Routes {
		fmt.Fprintf(w, "  route\t%s -> :%d%s\n", r.Key(), r.ContainerPort, routeOptions(r.Options))
	}
	for _, m := range ing.Machines {
		if m.Off {
			fmt.Fprintf(w, "  on %s\toff: it does not accept ingress\n", m.Machine)
			continue
		}
		if m.Error != "" {
			fmt.Fprintf(w, "  on %s\tunknown: %s\n", m.Machine, m.Error)
		}
		for _, r := range m.Routes {
			detail := r.Detail
			if len(r.Upstreams) > 0 {
				detail = strings.TrimSpace("-> " + strings.Join(r.Upstreams, ",") + " " + detail)
			}
			fmt.Fprintf(w, "  on %s\t%s %s %s\n", m.Machine, r.Key(), r.State, detail)
		}
	}
}

// DetachedRun prints `ployz run --detach`: the Container started, how to
// follow its output, and whether it is kept once it ended.
func DetachedRun(w io.Writer, d client.DetachedRun, keep bool) {
	fmt.Fprintf(w, "started %s (%s) on %s\n", d.Container, d.ID[:min(12, len(d.ID))], d.Machine)
	fmt.Fprintf(w, "logs: %s\n", d.Logs)
	if keep {
		fmt.Fprintf(w, "kept after it ends: `docker rm %s` on %s removes it\n", d.Container, d.Machine)
	} else {
		fmt.Fprintln(w, "removed once it ended and its output is in the Log Store")
	}
}
