package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// inspection is `ployz service inspect`: execution and ingress status are
// separate facts (docs/architecture.md): Containers can be ready while ingress is
// not configured, and the other way round.
type inspection struct {
	Namespace string          `json:"namespace"`
	Service   string          `json:"service"`
	ServiceID string          `json:"service_id,omitempty"`
	Declared  *declaration    `json:"declared,omitempty"`
	Execution executionStatus `json:"execution"`
	Ingress   ingressStatus   `json:"ingress"`
	// Serving is the Service's Serving Pointer and each Machine's ack of
	// it, as the entry's store has them (absent: no pointer yet).
	Serving    *rpc.ServiceServing        `json:"serving,omitempty"`
	Containers []rpc.ContainerObservation `json:"containers"`
	Unobserved []deploy.Unobserved        `json:"unobserved,omitempty"`
}

type declaration struct {
	Mode      string `json:"mode"`
	Replicas  int    `json:"replicas"`
	Image     string `json:"image"`
	Readiness string `json:"readiness"`
}

type executionStatus struct {
	// Status is ready (every desired Container ready), degraded (some
	// ready), not ready (running, none ready), stopped (nothing running),
	// or unknown (Machines unobserved and not enough ready).
	Status  string `json:"status"`
	Desired int    `json:"desired"`
	Running int    `json:"running"`
	Ready   int    `json:"ready"`
	// Restarts sums Docker's restarts of the Containers; NotReadyOn names
	// the Machines holding a Container that is not ready.
	Restarts   int      `json:"restarts"`
	NotReadyOn []string `json:"not_ready_on,omitempty"`
}

// ingressStatus is the Service's ingress half: published (every Machine's
// proxy routes every hostname to this Service's ready Containers), pending,
// conflict, unknown (a Machine did not answer) or not configured (no
// hostname routes), with each Machine's view.
type ingressStatus struct {
	Status   string                `json:"status"`
	Routes   []deploy.IngressRoute `json:"routes,omitempty"`
	Reason   string                `json:"reason,omitempty"`
	Machines []machineRoutes       `json:"machines,omitempty"`
}

func serviceInspect() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "inspect SERVICE",
		Short: "Show a Service's execution status and ingress status",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				p, err := f.resolveProject(c.Context(), s.st, s.ctx)
				if err != nil {
					return err
				}
				in, snap, err := inspectService(c.Context(), s, deploy.Namespace(p, f.env), args[0],
					func() ([]machineIngress, error) { return ingressFanout(c.Context(), s.ent) })
				if err != nil {
					return err
				}
				if g.json {
					return printJSON(c.OutOrStdout(), in)
				}
				warnUnobserved(c.ErrOrStderr(), snap)
				w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "service\t%s\nnamespace\t%s\nservice id\t%s\n", in.Service, in.Namespace, in.ServiceID)
				if d := in.Declared; d != nil {
					fmt.Fprintf(w, "declared\t%s, replicas %d, image %s, readiness %s\n", d.Mode, d.Replicas, d.Image, d.Readiness)
				}
				e := in.Execution
				fmt.Fprintf(w, "execution\t%s (desired %d, running %d, ready %d, restarts %d)\n", e.Status, e.Desired, e.Running, e.Ready, e.Restarts)
				if len(e.NotReadyOn) > 0 {
					fmt.Fprintf(w, "  not ready on\t%s\n", strings.Join(e.NotReadyOn, ", "))
				}
				if in.Ingress.Reason != "" {
					fmt.Fprintf(w, "ingress\t%s (%s)\n", in.Ingress.Status, in.Ingress.Reason)
				} else {
					fmt.Fprintf(w, "ingress\t%s\n", in.Ingress.Status)
				}
				for _, r := range in.Ingress.Routes {
					fmt.Fprintf(w, "  route\t%s -> :%d\n", r.Key(), r.ContainerPort)
				}
				for _, m := range in.Ingress.Machines {
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
				if sv := in.Serving; sv != nil {
					acked := 0
					for _, a := range sv.Acks {
						if a.Current(sv.Pointer) {
							acked++
						}
					}
					fmt.Fprintf(w, "serving pointer\t%s (deployment %s, %d Container(s)), acked by %d of %d Machines", sv.Pointer, sv.Deployment, len(sv.Containers), acked, len(sv.Acks))
					if p := sv.Pending(); len(p) > 0 {
						fmt.Fprintf(w, "; waiting for %s", strings.Join(p, ", "))
					}
					fmt.Fprintln(w)
				}
				for _, co := range in.Containers {
					fmt.Fprintf(w, "  container\t%s on %s: %s, ready %t, %s, restarts %d, last exit %s\n", co.Name, machineName(snap, co.MachineID),
						co.State, co.Ready, co.IP, co.RestartCount, lastExit(co, time.Now()))
				}
				return w.Flush()
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// inspectService is `ployz service inspect`'s answer for one Service of
// ns: execution and ingress status, the Serving Pointer and its acks.
// fanout reads every Machine's ingress (asked only when the Service has
// routes).
func inspectService(ctx context.Context, s session, ns, service string, fanout func() ([]machineIngress, error)) (inspection, deploy.Snapshot, error) {
	snap, cs, err := serviceContainers(ctx, s, ns, service)
	if err != nil {
		return inspection{}, snap, err
	}
	in := inspection{Namespace: ns, Service: service, Containers: cs, Unobserved: snap.Missing}
	if sv, ok := declared(ctx, s.st, s.ctx)[ns][service]; ok {
		in.Declared = &declaration{Mode: sv.Mode, Replicas: sv.Replicas, Image: sv.Spec.Image, Readiness: sv.Spec.Readiness}
		in.Execution.Desired = sv.Replicas
		in.Ingress.Routes = sv.Ingress
	} else if len(cs) == 0 {
		return inspection{}, snap, errNoService(service, ns, snap)
	}
	for _, co := range cs {
		in.ServiceID = co.ServiceID
		if co.State == "running" {
			in.Execution.Running++
		}
		if co.Ready {
			in.Execution.Ready++
		} else {
			in.Execution.NotReadyOn = append(in.Execution.NotReadyOn, machineName(snap, co.MachineID))
		}
		in.Execution.Restarts += co.RestartCount
	}
	sort.Strings(in.Execution.NotReadyOn)
	in.Execution.NotReadyOn = slices.Compact(in.Execution.NotReadyOn)
	if in.Declared != nil && in.Declared.Mode == deploy.ModeGlobal {
		in.Execution.Desired = len(cs)
	}
	in.Execution.Status = deploy.ExecutionStatus(in.Execution.Desired, in.Execution.Running, in.Execution.Ready, snap.Complete())
	if in.Ingress.Routes == nil {
		in.Ingress.Routes = observedRoutes(cs)
	}
	in.Ingress = ingressOf(ns, service, in.Ingress.Routes, fanout)
	var sst rpc.ServingStatus
	if err := s.ent.Call(ctx, rpc.Target{}, rpc.CmdServingStatus, rpc.ServingStatusRequest{Services: []string{ingress.ServiceKey(ns, service)}}, &sst); err == nil && len(sst.Services) == 1 && sst.Services[0].Pointer != "" {
		in.Serving = &sst.Services[0]
	}
	return in, snap, nil
}

// observedRoutes are the ingress routes of the first Container whose
// spec declares any (a Service no Saved State declares any more).
func observedRoutes(cs []rpc.ContainerObservation) []deploy.IngressRoute {
	var out []deploy.IngressRoute
	for _, co := range cs {
		if co.Spec != nil && len(co.Spec.Ingress) > 0 {
			for _, r := range co.Spec.Ingress {
				out = append(out, deploy.IngressRoute{Hostname: r.Hostname, ContainerPort: r.ContainerPort, Protocol: r.Protocol, Port: r.Port})
			}
			break
		}
	}
	return out
}

// ingressOf is a Service's ingress status for routes; fanout (asked only
// when there are routes) reads every Machine's proxy.
func ingressOf(ns, service string, routes []deploy.IngressRoute, fanout func() ([]machineIngress, error)) ingressStatus {
	st := ingressStatus{Routes: routes}
	if len(routes) == 0 {
		st.Status, st.Reason = "not configured", "the Service declares no x-ports hostname or ingress_port"
		return st
	}
	var hosts []string
	for _, r := range routes {
		hosts = append(hosts, r.Key())
	}
	ms, err := fanout()
	if err != nil {
		st.Status, st.Reason = "unknown", err.Error()
		return st
	}
	st.Status, st.Machines = serviceIngress(ingress.ServiceKey(ns, service), hosts, ms)
	return st
}

// latestDeploy runs a deploy of the latest Saved State changed by edit.
func latestDeploy(c *cobra.Command, f projectFlags, why string, edit func([]byte) ([]byte, error), restart ...string) error {
	st, err := openStore()
	if err != nil {
		return err
	}
	oc, err := contextName(st)
	if err != nil {
		st.Close()
		return err
	}
	p, err := f.resolveProject(c.Context(), st, oc)
	if err != nil {
		st.Close()
		return err
	}
	latest, err := st.LatestState(oc, p, f.env)
	st.Close()
	if err != nil {
		return fmt.Errorf("%w; deploy it first with `ployz deploy`", err)
	}
	if len(latest.Compose) == 0 {
		return fmt.Errorf("%s was removed (revision %d); deploy it again with `ployz deploy`", deploy.Namespace(p, f.env), latest.Revision)
	}
	b, err := edit(latest.Compose)
	if err != nil {
		return err
	}
	df := deployFlags{projectFlags: projectFlags{file: "compose.yaml", project: p, env: f.env}, timeout: defaultReadyTimeout, noBuild: true, restart: restart}
	return runDeploy(c, b, df, fmt.Sprintf("%s (from revision %d)", why, latest.Revision))
}

// contextName is the operator context a command uses, without dialing.
func contextName(st *operator.Store) (string, error) {
	if g.context != "" || g.connect != "" {
		return g.context, nil
	}
	oc, err := operator.Resolve(st, "")
	return oc.Name, err
}

// defaultReadyTimeout bounds each wait_ready of scale, rm, start.
const defaultReadyTimeout = 120 * time.Second

// restartCommand replaces every running Container of a Service with a
// fresh one of the same spec, start-first through the Serving Pointer, so
// clients see no gap (a new revision of the same compose file).
func restartCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "restart SERVICE",
		Short: "Replace a Service's running Containers with fresh ones, start-first (no gap for clients)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return restartService(c, f, args[0])
		},
	}
	f.add(cmd, false)
	return cmd
}

// restartService deploys the latest Saved State replacing service's
// Containers (`ployz service restart`, the dashboard's Restart).
func restartService(c *cobra.Command, f projectFlags, service string) error {
	return latestDeploy(c, f, "restart "+service, func(b []byte) ([]byte, error) {
		return b, deploy.CheckService(b, service)
	}, service)
}

// scaleService deploys the latest Saved State with service's replicas
// set to n (`ployz scale`, the dashboard's Scale).
func scaleService(c *cobra.Command, f projectFlags, service string, n int) error {
	return latestDeploy(c, f, fmt.Sprintf("scale %s to %d", service, n), func(b []byte) ([]byte, error) {
		return deploy.SetReplicas(b, service, n)
	})
}

func scaleCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "scale SERVICE REPLICAS",
		Short: "Deploy the latest Saved State with SERVICE's replicas changed (a new revision)",
		Args:  cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return fmt.Errorf("REPLICAS %q: want a number >= 0", args[1])
			}
			return scaleService(c, f, args[0], n)
		},
	}
	f.add(cmd, false)
	return cmd
}

func rmCommand() *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   "rm SERVICE",
		Short: "Deploy the latest Saved State without SERVICE (a new revision); its Containers are pruned",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return latestDeploy(c, f, "remove service "+args[0], func(b []byte) ([]byte, error) {
				return deploy.RemoveService(b, args[0])
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// startStopCommand starts or stops a Service's existing Containers. It
// does not change the Saved State: the next deploy starts stopped
// up-to-date Containers again (use scale SERVICE 0 to keep them stopped).
func startStopCommand(verb string) *cobra.Command {
	var f projectFlags
	cmd := &cobra.Command{
		Use:   verb + " SERVICE",
		Short: verb + " a Service's existing Containers on every Machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withSession(c, func(s session) error {
				p, err := f.resolveProject(c.Context(), s.st, s.ctx)
				if err != nil {
					return err
				}
				return startStopService(c, s, deploy.Namespace(p, f.env), args[0], verb)
			})
		},
	}
	f.add(cmd, false)
	return cmd
}

// startStopService starts or stops service's existing Containers in ns
// (`ployz start|stop`, the dashboard's Start and Stop).
func startStopService(c *cobra.Command, s session, ns, service, verb string) error {
	snap, cs, err := serviceContainers(c.Context(), s, ns, service)
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return errNoService(service, ns, snap)
	}
	plan := deploy.Plan{Namespace: ns, DeploymentID: "(" + verb + ")"}
	for _, co := range cs {
		r := deploy.Row{MachineID: co.MachineID, Machine: machineName(snap, co.MachineID), Service: co.Service, OldID: co.ID, OldName: co.Name}
		switch {
		case verb == "stop" && deploy.Running(co):
			r.Op, r.Reason = deploy.OpStop, "requested stop"
		case verb == "start" && co.State != "running":
			r.Op, r.Reason = deploy.OpStart, "requested start"
		default:
			r.Op, r.Reason = deploy.OpUnchanged, "already "+co.State
		}
		plan.Rows = append(plan.Rows, r)
	}
	return runRows(c, s, plan, snap)
}

// runRows previews, confirms and executes hand-made rows (start, stop,
// project removal), exiting 3 when partial or when Machines were unseen.
func runRows(c *cobra.Command, s session, plan deploy.Plan, snap deploy.Snapshot) error {
	errw := c.ErrOrStderr()
	if !g.json {
		printPlan(errw, plan, "")
		warnUnobserved(errw, snap)
	}
	var out deploy.Outcome
	if plan.Changes() > 0 {
		if err := confirm(c, fmt.Sprintf("Apply %d change(s) to %s?", plan.Changes(), plan.Namespace)); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		out = (&deploy.Executor{C: s.ent, Progress: progressPrinter(errw), ReadyTimeout: defaultReadyTimeout}).Run(ctx, plan)
	} else {
		out.Status = "completed"
	}
	if g.json {
		if err := printJSON(c.OutOrStdout(), map[string]any{"plan": plan, "outcome": out, "unobserved": snap.Missing}); err != nil {
			return err
		}
	} else if plan.Changes() > 0 {
		printOutcome(errw, plan, out)
	}
	switch {
	case out.Partial():
		return &exitError{code: 3, err: fmt.Errorf("%s: %d step(s) failed, %d never attempted", out.Status, out.Count(deploy.StepFailed), out.Count(deploy.StepNeverAttempted)), silent: g.json}
	case !snap.Complete():
		return &exitError{code: 3, err: fmt.Errorf("Machines not observed, their Containers untouched: %s", snap.MissingNames()), silent: g.json}
	}
	return nil
}
