package dashsource

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/core/volumes"
	"github.com/ployz/ployz/sdk/ingress"
)

// Cluster is the Machines the entry observes, each with what it says of
// its own plugins.
func (x *Source) Cluster(ctx context.Context) (dashboard.Cluster, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Cluster{}, err
	}
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, s.Entry(), rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return dashboard.Cluster{}, err
	}
	out := dashboard.Cluster{Observer: list.ObserverName, ObservedAt: list.ObservedAt}
	plugins, failed := inspectAll(ctx, s)
	for _, m := range list.Machines {
		dm := dashboard.Machine{MachineView: m, DrainedSince: m.Labels[rpc.MachineLabelDrained], Plugins: plugins[m.ID], PluginsError: failed[m.ID]}
		if _, ok := plugins[m.ID]; !ok && dm.PluginsError == "" {
			dm.PluginsError = "not inspected"
		}
		out.Machines = append(out.Machines, dm)
	}
	sort.SliceStable(out.Machines, func(i, j int) bool { return out.Machines[i].Name < out.Machines[j].Name })
	return out, nil
}

// inspectAll asks every Machine for its plugins; failed says why a
// Machine has none.
func inspectAll(ctx context.Context, s *client.Session) (plugins map[string][]rpc.PluginView, failed map[string]string) {
	plugins, failed = map[string][]rpc.PluginView{}, map[string]string{}
	fr, err := rpc.FanoutMethod(ctx, s.Entry(), rpc.Target{All: true}, rpc.Inspect, rpc.None{})
	if err != nil {
		return plugins, failed
	}
	for _, r := range fr.Results {
		if r.Error != nil {
			failed[r.MachineID] = r.Error.Error()
			continue
		}
		in, err := rpc.Inspect.Answer(r.Payload)
		if err != nil {
			failed[r.MachineID] = "malformed inspect answer"
			continue
		}
		plugins[r.MachineID] = in.Plugins
	}
	for _, o := range fr.Omitted {
		failed[o.MachineID] = o.Reason
	}
	return plugins, failed
}

// Services is `ployz ls` with execution and ingress status side by side.
func (x *Source) Services(ctx context.Context) (dashboard.Services, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Services{}, err
	}
	snap, err := deploy.Observe(ctx, s.Entry(), "", false)
	if err != nil {
		return dashboard.Services{}, err
	}
	deploy.ObserveServing(ctx, s.Entry(), &snap)
	decl := s.Declared(ctx)
	removing := s.Removing(ctx)
	ing := &ingressOnce{ctx: ctx, ent: s.Entry()}
	out := dashboard.Services{Unobserved: snap.Missing}
	for _, r := range views.Services(snap, decl, removing, "") {
		sv, ok := decl[r.Namespace][r.Service]
		desired, _ := strconv.Atoi(r.Desired)
		if ok && sv.Mode == deploy.ModeGlobal {
			desired = r.Total
		}
		routes := sv.Ingress
		if !ok {
			routes = client.ObservedRoutes(client.ServiceOf(snap, r.Namespace, r.Service))
		}
		out.Services = append(out.Services, dashboard.ServiceRow{ServiceRow: r,
			Execution:    deploy.ExecutionStatus(desired, r.Running, r.Ready, snap.Complete()),
			Ingress:      client.IngressOf(r.Namespace, r.Service, routes, ing.get).Status,
			Certificates: certSummaries(routes, ing),
			Scalable:     ok && !removing[r.Namespace]})
	}
	return out, nil
}

// Service is `ployz service inspect` with each Machine's routes, the
// Deploy of its namespace running now and the volumes it bind-mounts.
func (x *Source) Service(ctx context.Context, ns, service string) (dashboard.Service, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Service{}, err
	}
	ing := &ingressOnce{ctx: ctx, ent: s.Entry()}
	in, snap, err := s.InspectService(ctx, ns, service, ing.get)
	if err != nil {
		return dashboard.Service{}, err
	}
	out := dashboard.Service{Namespace: ns, Service: service, Desired: in.Execution.Desired, Running: in.Execution.Running,
		Ready: in.Execution.Ready, Execution: in.Execution.Status, Ingress: in.Ingress.Status, IngressReason: in.Ingress.Reason,
		Serving: in.Serving, Unobserved: in.Unobserved, Containers: []dashboard.Container{}}
	if ing.asked {
		out.Routes = ingressViews(ingress.ServiceKey(ns, service), in.Ingress.Routes, ing.ms)
	}
	now := time.Now()
	for _, co := range in.Containers {
		out.Containers = append(out.Containers, dashboard.Container{Machine: views.MachineName(snap, co.MachineID), ContainerObservation: co, LastExit: render.LastExit(co, now)})
	}
	sort.SliceStable(out.Containers, func(i, j int) bool { return out.Containers[i].Machine < out.Containers[j].Machine })
	out.Deploying = runningDeploy(s, ns)
	// Only a bind mount can mount a Provisioned Volume: ask the Machines
	// holding such Containers for their volumes, and only then.
	if volumes.BindMounts(in.Containers) {
		out.Volumes, out.VolumesError = mountedVolumes(ctx, s, in.Containers)
	}
	return out, nil
}

// mountedVolumes are the Provisioned Volumes cs mount, asked of the
// Machines holding them.
func mountedVolumes(ctx context.Context, s *client.Session, cs []rpc.ContainerObservation) ([]volumes.Mount, string) {
	var ids []string
	for _, co := range cs {
		if !slices.Contains(ids, co.MachineID) {
			ids = append(ids, co.MachineID)
		}
	}
	ms, err := volumes.List(ctx, s.Entry(), rpc.Target{Set: ids})
	if err != nil {
		return nil, err.Error()
	}
	if u := volumes.Unanswered(ms); len(u) > 0 {
		return volumes.Mounts(ms, cs), "no volume list from " + strings.Join(u, ", ")
	}
	return volumes.Mounts(ms, cs), ""
}

// Volumes is `ployz volume ls`'s list (volumes.List), with the Containers
// that mount a volume when any Machine holds one.
func (x *Source) Volumes(ctx context.Context) (dashboard.Volumes, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Volumes{}, err
	}
	ms, err := volumes.List(ctx, s.Entry(), rpc.Target{All: true})
	if err != nil {
		return dashboard.Volumes{}, err
	}
	var out dashboard.Volumes
	held := false
	for _, m := range ms {
		out.Machines = append(out.Machines, dashboard.VolumeMachine{MachineVolumes: m})
		held = held || m.List != nil && len(m.List.Volumes) > 0
	}
	if !held {
		return out, nil
	}
	protect(ctx, s, out.Machines)
	snap, err := deploy.Observe(ctx, s.Entry(), "", false)
	if err != nil {
		out.MountsError = err.Error()
		return out, nil
	}
	var cs []rpc.ContainerObservation
	for _, m := range snap.Machines {
		cs = append(cs, m.Containers...)
	}
	out.Mounts, out.Unobserved = volumes.Mounts(ms, cs), snap.Missing
	return out, nil
}

// runningDeploy is the newest record of ns still running (nil if none).
func runningDeploy(s *client.Session, ns string) *deploy.Record {
	recs, _, err := s.DeployRecords(20)
	if err != nil {
		return nil
	}
	for _, r := range recs {
		if r.Namespace == ns && r.Status == deploy.RecordRunning && !r.Stale {
			return &r
		}
	}
	return nil
}

// ingressOnce reads every Machine's ingress at most once per page read;
// asked stays false when no route needed it.
type ingressOnce struct {
	ctx   context.Context
	ent   *rpc.Client
	ms    []client.MachineIngress
	err   error
	asked bool
}

func (o *ingressOnce) get() ([]client.MachineIngress, error) {
	if !o.asked {
		o.asked = true
		o.ms, o.err = client.IngressFanout(o.ctx, o.ent)
	}
	return o.ms, o.err
}

// certSummaries is each hostname route's certificate across the
// Machines, from the ingress status the Ingress column already read.
func certSummaries(routes []deploy.IngressRoute, ing *ingressOnce) []dashboard.CertSummary {
	var out []dashboard.CertSummary
	for _, r := range routes {
		if r.Hostname == "" {
			continue
		}
		ms, err := ing.get()
		if err != nil {
			return []dashboard.CertSummary{{Hostname: r.Hostname, State: "unknown", Detail: err.Error()}}
		}
		var mc []dashboard.MachineCerts
		for _, m := range ms {
			c := dashboard.MachineCerts{Machine: m.Machine, Error: m.Error}
			if m.Status != nil {
				c.HTTPS, c.Certs = m.Status.ListenTLS != "", m.Status.Certificates
			} else if c.Error == "" {
				c.Error = "no ingress status"
			}
			mc = append(mc, c)
		}
		sum := dashboard.SummarizeCerts(r.Hostname, mc)
		if sum.State == "issued" {
			sum.Warning = client.CertExpiry(sum.NotAfter, time.Now())
		}
		out = append(out, sum)
	}
	return out
}

// ingressViews is each Machine's state of the Service's routes, with the
// certificate line `ployz ingress config` prints for a hostname.
func ingressViews(owner string, routes []deploy.IngressRoute, ms []client.MachineIngress) []dashboard.RouteView {
	var out []dashboard.RouteView
	for _, m := range ms {
		if m.Status == nil {
			out = append(out, dashboard.RouteView{Machine: m.Machine, Error: m.Error})
			continue
		}
		for _, want := range routes {
			rv := dashboard.RouteView{Machine: m.Machine, Route: want.Key(), State: ingress.RoutePending}
			for _, r := range m.Status.Routes {
				if r.Key() == want.Key() {
					rv.State, rv.Detail, rv.Upstreams = r.State, r.Detail, r.Upstreams
					if r.Owner != owner && r.Owner != "" {
						rv.Detail = strings.TrimSpace("owned by " + r.Owner + " " + rv.Detail)
					}
				}
			}
			rv.Certificate = strings.TrimSpace(client.CertLine(m.Status, want.Hostname))
			out = append(out, rv)
		}
	}
	return out
}

// Deploys is the Deploys this computer ran, the Saved State revisions and
// which deployments each Machine's Containers of a namespace carry.
func (x *Source) Deploys(ctx context.Context) (dashboard.Deploys, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Deploys{}, err
	}
	out := dashboard.Deploys{Revisions: []dashboard.Revision{}, Running: []dashboard.NamespaceDeployment{}}
	if out.Revisions, err = revisions(s); err != nil {
		return dashboard.Deploys{}, err
	}
	recs, _, err := s.DeployRecords(20)
	if err != nil {
		return out, err
	}
	out.Records, out.LastOutcomes = recs, deploy.LastOutcomes(recs)
	snap, err := deploy.Observe(ctx, s.Entry(), "", false)
	if err != nil {
		return out, err
	}
	out.Running = running(snap)
	return out, nil
}

// revisions are the context's Saved State revisions, newest first.
func revisions(s *client.Session) ([]dashboard.Revision, error) {
	states, err := s.Store().States(s.ContextName())
	if err != nil {
		return nil, err
	}
	out := []dashboard.Revision{}
	latest := map[string]int{}
	for _, st := range states {
		ns := deploy.Namespace(st.Project, st.Environment)
		latest[ns] = max(latest[ns], st.Revision)
		out = append(out, dashboard.Revision{Namespace: ns, Project: st.Project, Environment: st.Environment, Revision: st.Revision, CreatedAt: st.CreatedAt})
	}
	for i := range out {
		out[i].Latest = out[i].Revision == latest[out[i].Namespace]
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// running is the deployments each Machine's Containers of a namespace carry.
func running(snap deploy.Snapshot) []dashboard.NamespaceDeployment {
	out := []dashboard.NamespaceDeployment{}
	for _, m := range snap.Machines {
		byNS := map[string]map[string]bool{}
		for _, co := range m.Containers {
			if byNS[co.Namespace] == nil {
				byNS[co.Namespace] = map[string]bool{}
			}
			byNS[co.Namespace][co.Deployment] = true
		}
		for ns, deps := range byNS {
			nd := dashboard.NamespaceDeployment{Namespace: ns, Machine: m.Name}
			for d := range deps {
				nd.Deployments = append(nd.Deployments, d)
			}
			sort.Strings(nd.Deployments)
			out = append(out, nd)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Machine < b.Machine
	})
	return out
}

// Jobs is `ployz jobs ls --all` with each job's newest runs.
func (x *Source) Jobs(ctx context.Context) (dashboard.Jobs, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Jobs{}, err
	}
	l, err := s.JobList(ctx, client.JobsRequest{Runs: dashboard.JobRunsShown})
	if err != nil {
		return dashboard.Jobs{}, err
	}
	return dashboard.JobsPage(l), nil
}

// protect sets each listed volume's protection as `ployz volume inspect`
// reads it (volumerun's Protection: automatic snapshots, and for a
// Writer's copy each Mirror's lag and the newest scheduled run from the
// Cluster's runs), with the Mirror interval the latest Saved States
// declare. A volume with none of them has no entry.
func protect(ctx context.Context, s *client.Session, ms []dashboard.VolumeMachine) {
	rn := client.VolumeRunner(s, nil)
	policies, _ := s.VolumePolicies(ctx) // unreadable: no interval, so nothing is judged overdue
	for i, m := range ms {
		if m.List == nil {
			continue
		}
		for _, v := range m.List.Volumes {
			writer := v.Copy != nil && v.Copy.Role == volumecopy.Writer
			p, err := rn.Protection(ctx, m.Machine, v)
			vp := dashboard.VolumeProtection{Protection: p}
			if err != nil {
				vp.Error = err.Error()
			}
			if mirror := policies[v.Name].Mirror; writer && mirror != nil {
				vp.MirrorEvery = mirror.Every
			}
			if p.SnapshotsKept == 0 && !(writer && (len(p.Mirrors) > 0 || p.Scheduled != nil || vp.Error != "" || vp.MirrorEvery != "")) {
				continue
			}
			if ms[i].Protection == nil {
				ms[i].Protection = map[string]dashboard.VolumeProtection{}
			}
			ms[i].Protection[v.Name] = vp
		}
	}
}
