package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/dashboard"
	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/core/volumes"
	"github.com/ployz/ployz/sdk/ingress"
)

func dashboardCommand() *cobra.Command {
	listen := dashboard.DefaultListen
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a local web UI of the Cluster: Machines, Services, Deploys, Volumes, logs and metrics; scale and restart",
		Long: `Serve a web UI on this computer that reads and acts on the Cluster through the
current context, exactly as the CLI does: no listener is added on any Machine.
It listens on 127.0.0.1 by default and has no login: anyone who can reach the
address can read the Cluster and scale or restart Services. A button is the
confirmation of its action (as -y is for the CLI).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			defer ln.Close()
			if host, _, _ := net.SplitHostPort(listen); host != "localhost" && !(net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback()) {
				fmt.Fprintf(c.ErrOrStderr(), "warning: --listen %s is not loopback; the dashboard has no login\n", listen)
			}
			src := &sessionSource{}
			defer src.close()
			// The browser's buttons confirm the dashboard's actions.
			g.yes = true
			log := hclog.New(&hclog.LoggerOptions{Name: "ployz", Output: c.ErrOrStderr(), Level: hclog.Info})
			srv, err := dashboard.New(src, dashboard.Options{Listen: ln.Addr().String(), Logger: log})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.ErrOrStderr(), "dashboard at http://%s/ (Ctrl-C stops it)\n", ln.Addr())
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Serve(ctx, ln)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", listen, "address to serve on (host:port)")
	return cmd
}

// sessionSource is the dashboard's Source: one session (store, entry,
// context) opened on first use and kept, read with the CLI's functions.
type sessionSource struct {
	mu sync.Mutex
	s  *session
}

func (x *sessionSource) session() (session, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.s != nil {
		return *x.s, nil
	}
	st, err := openStore()
	if err != nil {
		return session{}, err
	}
	// The entry outlives any one request.
	ent, oc, err := entry(context.Background(), st)
	if err != nil {
		st.Close()
		return session{}, err
	}
	x.s = &session{st: st, ent: ent, ctx: oc.Name}
	return *x.s, nil
}

func (x *sessionSource) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.s != nil {
		x.s.ent.Close()
		x.s.st.Close()
	}
}

// commandFor is a cobra command carrying ctx and writing to out, for the
// CLI functions that take one.
func commandFor(ctx context.Context, out io.Writer) *cobra.Command {
	c := &cobra.Command{}
	c.SetContext(ctx)
	c.SetOut(out)
	c.SetErr(out)
	return c
}

func (x *sessionSource) Cluster(ctx context.Context) (dashboard.Cluster, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Cluster{}, err
	}
	var list rpc.MachineList
	if err := s.ent.Call(ctx, rpc.Target{}, rpc.CmdListMachines, nil, &list); err != nil {
		return dashboard.Cluster{}, err
	}
	out := dashboard.Cluster{Observer: list.ObserverName, ObservedAt: list.ObservedAt}
	plugins := map[string][]rpc.PluginView{}
	failed := map[string]string{}
	if fr, err := s.ent.Fanout(ctx, rpc.Target{All: true}, rpc.CmdInspect, nil); err == nil {
		for _, r := range fr.Results {
			var in rpc.Inspection
			switch {
			case r.Error != nil:
				failed[r.MachineID] = r.Error.Error()
			case json.Unmarshal(r.Payload, &in) != nil:
				failed[r.MachineID] = "malformed inspect answer"
			default:
				plugins[r.MachineID] = in.Plugins
			}
		}
		for _, o := range fr.Omitted {
			failed[o.MachineID] = o.Reason
		}
	}
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

func (x *sessionSource) Services(ctx context.Context) (dashboard.Services, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Services{}, err
	}
	snap, err := deploy.Observe(ctx, s.ent, "", false)
	if err != nil {
		return dashboard.Services{}, err
	}
	decl := declared(ctx, s.st, s.ctx)
	removing := removingNamespaces(s)
	ing := &ingressOnce{ctx: ctx, s: s}
	out := dashboard.Services{Unobserved: snap.Missing}
	for _, r := range views.Services(snap, decl, removing, "") {
		sv, ok := decl[r.Namespace][r.Service]
		desired, _ := strconv.Atoi(r.Desired)
		if ok && sv.Mode == deploy.ModeGlobal {
			desired = r.Total
		}
		routes := sv.Ingress
		if !ok {
			cs := serviceOf(snap, r.Namespace, r.Service)
			routes = observedRoutes(cs)
		}
		out.Services = append(out.Services, dashboard.ServiceRow{ServiceRow: r,
			Execution:    deploy.ExecutionStatus(desired, r.Running, r.Ready, snap.Complete()),
			Ingress:      ingressOf(r.Namespace, r.Service, routes, ing.get).Status,
			Certificates: certSummaries(routes, ing),
			Scalable:     ok && !removing[r.Namespace]})
	}
	return out, nil
}

func (x *sessionSource) Service(ctx context.Context, ns, service string) (dashboard.Service, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Service{}, err
	}
	ing := &ingressOnce{ctx: ctx, s: s}
	in, snap, err := inspectService(ctx, s, ns, service, ing.get)
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
		out.Containers = append(out.Containers, dashboard.Container{Machine: machineName(snap, co.MachineID), ContainerObservation: co, LastExit: lastExit(co, now)})
	}
	sort.SliceStable(out.Containers, func(i, j int) bool { return out.Containers[i].Machine < out.Containers[j].Machine })
	out.Deploying = runningDeploy(s, ns)
	// Only a bind mount can mount a Provisioned Volume: ask the Machines
	// holding such Containers for their volumes, and only then.
	if volumes.BindMounts(in.Containers) {
		var ids []string
		for _, co := range in.Containers {
			if !slices.Contains(ids, co.MachineID) {
				ids = append(ids, co.MachineID)
			}
		}
		ms, err := volumes.List(ctx, s.ent, rpc.Target{Set: ids})
		if err != nil {
			out.VolumesError = err.Error()
		} else {
			out.Volumes = volumes.Mounts(ms, in.Containers)
			if u := volumes.Unanswered(ms); len(u) > 0 {
				out.VolumesError = "no volume list from " + strings.Join(u, ", ")
			}
		}
	}
	return out, nil
}

// Volumes is `ployz volume ls`'s list (volumes.List), with the Containers
// that mount a volume when any Machine holds one.
func (x *sessionSource) Volumes(ctx context.Context) (dashboard.Volumes, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Volumes{}, err
	}
	ms, err := volumes.List(ctx, s.ent, rpc.Target{All: true})
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
	snap, err := deploy.Observe(ctx, s.ent, "", false)
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
func runningDeploy(s session, ns string) *deploy.Record {
	recs, _, err := deployRecords(s.st, s.ctx, 20)
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
	s     session
	ms    []machineIngress
	err   error
	asked bool
}

func (o *ingressOnce) get() ([]machineIngress, error) {
	if !o.asked {
		o.asked = true
		o.ms, o.err = ingressFanout(o.ctx, o.s.ent)
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
		out = append(out, dashboard.SummarizeCerts(r.Hostname, mc))
	}
	return out
}

// ingressViews is each Machine's state of the Service's routes, with the
// certificate line `ployz ingress config` prints for a hostname.
func ingressViews(owner string, routes []deploy.IngressRoute, ms []machineIngress) []dashboard.RouteView {
	var out []dashboard.RouteView
	for _, m := range ms {
		if m.Status == nil {
			out = append(out, dashboard.RouteView{Machine: m.Machine, Error: m.Error})
			continue
		}
		for _, want := range routes {
			rv := dashboard.RouteView{Machine: m.Machine, Route: want.Key(), State: rpc.RoutePending}
			for _, r := range m.Status.Routes {
				if r.Key() == want.Key() {
					rv.State, rv.Detail, rv.Upstreams = r.State, r.Detail, r.Upstreams
					if r.Owner != owner && r.Owner != "" {
						rv.Detail = strings.TrimSpace("owned by " + r.Owner + " " + rv.Detail)
					}
				}
			}
			rv.Certificate = strings.TrimSpace(certLine(m.Status, want.Hostname))
			out = append(out, rv)
		}
	}
	return out
}

func (x *sessionSource) Deploys(ctx context.Context) (dashboard.Deploys, error) {
	s, err := x.session()
	if err != nil {
		return dashboard.Deploys{}, err
	}
	states, err := s.st.States(s.ctx)
	if err != nil {
		return dashboard.Deploys{}, err
	}
	out := dashboard.Deploys{Revisions: []dashboard.Revision{}, Running: []dashboard.NamespaceDeployment{}}
	recs, _, err := deployRecords(s.st, s.ctx, 20)
	if err != nil {
		return out, err
	}
	out.Records, out.LastOutcomes = recs, deploy.LastOutcomes(recs)
	latest := map[string]int{}
	for _, st := range states {
		ns := deploy.Namespace(st.Project, st.Environment)
		latest[ns] = max(latest[ns], st.Revision)
		out.Revisions = append(out.Revisions, dashboard.Revision{Namespace: ns, Project: st.Project, Environment: st.Environment, Revision: st.Revision, CreatedAt: st.CreatedAt})
	}
	for i := range out.Revisions {
		out.Revisions[i].Latest = out.Revisions[i].Revision == latest[out.Revisions[i].Namespace]
	}
	sort.SliceStable(out.Revisions, func(i, j int) bool { return out.Revisions[i].CreatedAt.After(out.Revisions[j].CreatedAt) })
	snap, err := deploy.Observe(ctx, s.ent, "", false)
	if err != nil {
		return out, err
	}
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
			out.Running = append(out.Running, nd)
		}
	}
	sort.Slice(out.Running, func(i, j int) bool {
		a, b := out.Running[i], out.Running[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Machine < b.Machine
	})
	return out, nil
}

func (x *sessionSource) Metrics(ctx context.Context, q dashboard.MetricsQuery) ([]dashboard.MachineMetrics, error) {
	s, err := x.session()
	if err != nil {
		return nil, err
	}
	req := rpc.QueryMetricsRequest{Machine: q.Service == "", Namespace: q.Namespace, Service: q.Service, Since: q.Since.UnixNano(), Until: q.Until.UnixNano()}
	if q.Until.Sub(q.Since) > 24*time.Hour {
		req.StepSeconds = 300
	}
	return fanoutMetrics(commandFor(ctx, io.Discard), s, "", req)
}

// Logs follows with `ployz logs -f`'s function, reading its printed
// lines back: stdout lines are log lines, stderr lines name a Machine.
func (x *sessionSource) Logs(ctx context.Context, ns, service string, emit func(dashboard.LogLine)) error {
	s, err := x.session()
	if err != nil {
		return err
	}
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { scanLines(outR, func(l string) { emit(parseLogLine(l)) }) })
	wg.Go(func() {
		scanLines(errR, func(l string) { emit(dashboard.LogLine{Error: strings.TrimPrefix(l, "warning: ")}) })
	})
	c := commandFor(ctx, outW)
	c.SetErr(errW)
	f := logsFlags{tail: 50, reopen: true, onStream: func(machine string, err error, wait time.Duration) {
		if err != nil {
			emit(dashboard.LogLine{Machine: machine, Error: err.Error(), Stream: "down", RetrySeconds: wait.Seconds()})
			return
		}
		emit(dashboard.LogLine{Machine: machine, Stream: "up"})
	}}
	err = followServiceLogs(c, s, f, rpc.LogQuery{Namespace: ns, Service: service})
	outW.Close()
	errW.Close()
	wg.Wait() // every line is emitted before the caller ends the stream
	return err
}

func scanLines(r io.Reader, f func(string)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r) // past an overlong line, never block the writer
}

// parseLogLine splits printLine's "machine container time | text".
func parseLogLine(l string) dashboard.LogLine {
	head, text, ok := strings.Cut(l, " | ")
	if !ok {
		return dashboard.LogLine{Text: l}
	}
	f := strings.Fields(head)
	out := dashboard.LogLine{Text: text}
	if len(f) == 3 {
		out.Machine, out.Container, out.Time = f[0], f[1], f[2]
	}
	return out
}

// projectOf finds the project and environment of ns from the latest
// Saved States (a namespace alone cannot be split: both may hold '-').
func (x *sessionSource) projectOf(ns string) (projectFlags, error) {
	s, err := x.session()
	if err != nil {
		return projectFlags{}, err
	}
	states, err := latestSaved(s.st, s.ctx)
	if err != nil {
		return projectFlags{}, err
	}
	for _, st := range states {
		if deploy.Namespace(st.Project, st.Environment) == ns {
			return projectFlags{project: st.Project, env: st.Environment}, nil
		}
	}
	return projectFlags{}, fmt.Errorf("namespace %s: no Saved State; deploy it with `ployz deploy` first", ns)
}

func (x *sessionSource) Scale(ctx context.Context, ns, service string, n int, out io.Writer) error {
	f, err := x.projectOf(ns)
	if err != nil {
		return err
	}
	return scaleService(commandFor(ctx, out), f, service, n)
}

func (x *sessionSource) Restart(ctx context.Context, ns, service string, out io.Writer) error {
	f, err := x.projectOf(ns)
	if err != nil {
		return err
	}
	return restartService(commandFor(ctx, out), f, service)
}

func (x *sessionSource) StartStop(ctx context.Context, ns, service, verb string, out io.Writer) error {
	s, err := x.session()
	if err != nil {
		return err
	}
	return startStopService(commandFor(ctx, out), s, ns, service, verb)
}
