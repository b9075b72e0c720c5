package render

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	units "github.com/docker/go-units"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
)

// Plan prints a plan's rows, pulls, ingress and warnings, after why (the
// operation that made it, "" for none).
func Plan(w io.Writer, p deploy.Plan, why string) {
	if why != "" {
		fmt.Fprintf(w, "%s\n", why)
	}
	fmt.Fprintf(w, "plan for %s (deployment %s)\n", p.Namespace, p.DeploymentID)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tSERVICE\tOPERATION\tCONTAINER\tREASON")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Service, rowOp(r), rowName(r), r.Reason)
	}
	tw.Flush()
	pulls(w, p)
	for _, s := range p.Services {
		for _, in := range s.Ingress {
			if in.Protocol == "tcp" {
				fmt.Fprintf(w, "ingress: tcp/%d -> %s:%d on every Machine's :%d (`ployz service inspect %s` shows it)\n", in.Port, s.Name, in.ContainerPort, in.Port, s.Name)
				continue
			}
			fmt.Fprintf(w, "ingress: %s -> %s:%d on every Machine's :80, and :443 once its certificate is issued (`ployz service inspect %s` shows it)\n", in.Hostname, s.Name, in.ContainerPort, s.Name)
		}
	}
	for _, warn := range p.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
}

func rowOp(r deploy.Row) string {
	op := r.Op
	if r.Strategy != "" {
		op += " (" + r.Strategy + ")"
	}
	if r.Pull {
		op = "pull+" + op
	}
	return op
}

func rowName(r deploy.Row) string {
	name := r.OldName
	if r.Op == deploy.OpCreateVolume {
		name = "volume " + r.Volume
	}
	if r.NewName != "" {
		name = r.NewName
		if r.OldName != "" {
			name = r.OldName + " -> " + r.NewName
		}
	}
	return name
}

// pulls says which Machines pull which image before their row.
func pulls(w io.Writer, p deploy.Plan) {
	var order []string
	on := map[string][]string{}
	for _, r := range p.Rows {
		if !r.Pull {
			continue
		}
		if _, ok := on[r.Spec.Image]; !ok {
			order = append(order, r.Spec.Image)
		}
		on[r.Spec.Image] = append(on[r.Spec.Image], r.Machine)
	}
	for _, img := range order {
		fmt.Fprintf(w, "pull: %s on %s, from its registry\n", img, strings.Join(on[img], ", "))
	}
}

// DeployPlan prints what planning a Deploy did and found: the images it
// delivered, the plan, and the pending removals it meets.
func DeployPlan(w io.Writer, dp *client.DeployPlan) {
	Deliveries(w, dp.Deliveries)
	Plan(w, dp.Plan, dp.Why)
	for _, m := range dp.PendingRemovals {
		if ns := deploy.Namespace(m.Project, m.Environment); ns == dp.Plan.Namespace {
			fmt.Fprintf(w, "note: %s has a pending removal; this deploy supersedes it\n", ns)
		} else {
			fmt.Fprintf(w, "note: the pending removal of %s is retried after this deploy\n", ns)
		}
	}
}

// Deliveries says which Machines an image reached, and which it did not.
func Deliveries(w io.Writer, res []images.Result) {
	for _, p := range res {
		switch p.Outcome {
		case "pushed":
			fmt.Fprintf(w, "image delivered to %s (%d bytes)\n", p.MachineName, p.Bytes)
		case "failed":
			fmt.Fprintf(w, "warning: image delivery to %s failed: %s\n", p.MachineName, p.Error)
		}
	}
}

// BuiltImages prints `ployz build`: each built Service's tag, then after
// a push each Machine's delivery.
func BuiltImages(w io.Writer, b client.BuiltImages) {
	for _, s := range b.Services {
		fmt.Fprintf(w, "%s\t%s\n", s.Name, s.Spec.Image)
	}
	if b.Deliveries != nil {
		DeliveryTable(w, b.Deliveries)
	}
}

// DeliveryTable is the table of an image push, one row per Machine.
func DeliveryTable(w io.Writer, res []images.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tOUTCOME\tBYTES\tLAYERS HELD\tERROR")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", r.MachineName, r.Outcome, r.Bytes, r.SkippedLayers, r.Error)
	}
	tw.Flush()
}

// Outcome prints a plan's outcome, per Machine, with each step that did
// not complete and its log tail.
func Outcome(w io.Writer, p deploy.Plan, o deploy.Outcome) {
	if p.Revision > 0 {
		fmt.Fprintf(w, "\noutcome of %s revision %d: %s\n", p.Namespace, p.Revision, o.Status)
	} else {
		fmt.Fprintf(w, "\noutcome in %s: %s\n", p.Namespace, o.Status)
	}
	byMachine := map[string][]deploy.Step{}
	var order []string
	for _, s := range o.Steps {
		if _, ok := byMachine[s.Machine]; !ok {
			order = append(order, s.Machine)
		}
		byMachine[s.Machine] = append(byMachine[s.Machine], s)
	}
	for _, m := range order {
		counts := map[string]int{}
		for _, s := range byMachine[m] {
			counts[s.Status]++
		}
		fmt.Fprintf(w, "  %s: %d completed, %d failed, %d never attempted\n", m, counts[deploy.StepCompleted], counts[deploy.StepFailed], counts[deploy.StepNeverAttempted])
		for _, s := range byMachine[m] {
			if s.Status == deploy.StepCompleted {
				continue
			}
			fmt.Fprintf(w, "    %s %s %s %s: %s\n", s.Status, s.Service, s.Action, s.Container, s.Error)
			for _, l := range s.LogTail {
				fmt.Fprintf(w, "      | %s\n", l)
			}
		}
	}
}

// DeployResult prints an applied Deploy's end: its outcome, or that it
// was up to date.
func DeployResult(w io.Writer, res client.DeployResult) {
	if res.Outcome == nil {
		fmt.Fprintf(w, "%s is up to date (revision %d)\n", res.Plan.Namespace, res.Plan.Revision)
		return
	}
	Outcome(w, res.Plan, *res.Outcome)
}

// Removal prints how a pending project removal stands.
func Removal(w io.Writer, r client.RemovalReport) {
	fmt.Fprintf(w, "removal of %s: %s, %d Container(s) removed", r.Namespace(), r.Status, r.Removed)
	if r.Reason != "" {
		fmt.Fprintf(w, " (%s)", r.Reason)
	}
	fmt.Fprintln(w)
}

// Unobserved warns of the Machines a snapshot misses.
func Unobserved(w io.Writer, snap deploy.Snapshot) {
	var down []string
	var other deploy.Snapshot
	for _, u := range snap.Missing {
		if m, ok := snap.Machine(u.MachineID); ok && m.Down() {
			down = append(down, cmp.Or(u.Name, u.MachineID))
			continue
		}
		other.Missing = append(other.Missing, u)
	}
	if len(down) > 0 {
		fmt.Fprintf(w, "warning: Down: %s: unreachable, its Containers' state is unknown and they are left out of DNS and the ingress; `ployz service restore-replicas` replaces what it served (docs/machine-loss.md)\n", strings.Join(down, ", "))
	}
	if !other.Complete() {
		fmt.Fprintln(w, "warning: not observed:", other.MissingNames())
	}
}

// Hooks print a running operation's steps, removals and warnings to w;
// live draws steps in flight as rows that their end overwrites (w is a
// terminal).
func Hooks(w io.Writer, live bool) client.Hooks {
	return client.Hooks{Step: Progress(w, live), Removal: func(r client.RemovalReport) { Removal(w, r) },
		Warn: func(err error) { fmt.Fprintln(w, "warning:", err) }}
}

// LastExit describes a Container's last exit for people: its code, an OOM
// kill, and how long ago; "-" when it never exited.
func LastExit(co rpc.ContainerObservation, now time.Time) string {
	at, err := time.Parse(time.RFC3339, co.FinishedAt)
	if err != nil {
		return "-"
	}
	s := strconv.Itoa(co.ExitCode)
	if co.OOMKilled {
		s += " OOM-killed"
	}
	return s + " (" + units.HumanDuration(now.Sub(at)) + " ago)"
}

// ContainerLabel names a log line's Container: its name, else a short id.
func ContainerLabel(r rpc.LogRecord) string {
	if r.ContainerName != "" {
		return r.ContainerName
	}
	if len(r.ContainerID) > 12 {
		return r.ContainerID[:12]
	}
	return r.ContainerID
}

// LogTime is a log line's time as printed: UTC, to the millisecond.
func LogTime(unixNano int64) string { return time.Unix(0, unixNano).UTC().Format("15:04:05.000") }
