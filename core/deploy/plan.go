package deploy

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// Row operations.
const (
	OpCreate    = "create"
	OpReplace   = "replace"
	OpRemove    = "remove"
	OpUnchanged = "unchanged"
	OpStop      = "stop"
	OpStart     = "start"
	OpHook      = "hook"
	// OpCreateVolume creates a compose-declared Provisioned Volume on
	// its first deploy, ahead of the Containers that mount it.
	OpCreateVolume = "create-volume"
)

// Replacement strategies.
const (
	StartFirst = "start-first"
	StopFirst  = "stop-first"
)

// Row is one line of a plan: one Container operation on one Machine.
type Row struct {
	MachineID string `json:"machine_id"`
	Machine   string `json:"machine"`
	Service   string `json:"service"`
	Op        string `json:"operation"`
	Reason    string `json:"reason"`
	Strategy  string `json:"strategy,omitempty"` // replace only
	// Old is the existing Container the row acts on (replace, remove,
	// stop, start, unchanged).
	OldID   string `json:"old_id,omitempty"`
	OldName string `json:"old_name,omitempty"`
	// OldRunning says whether the old Container was running, so a failed
	// stop-first replacement starts it again only if it was.
	OldRunning bool `json:"old_running,omitempty"`
	// New is the Container a create, replace or hook makes.
	NewName string             `json:"new_name,omitempty"`
	Spec    *rpc.ContainerSpec `json:"spec,omitempty"`
	// StopGraceSeconds bounds stops of the old Container.
	StopGraceSeconds int `json:"stop_grace_seconds,omitempty"`
	// HookTimeoutSeconds bounds a hook's run.
	HookTimeoutSeconds int `json:"hook_timeout_seconds,omitempty"`
	// Pull: the row first pulls Spec.Image from its registry on its
	// Machine (the Machine lacks it, or the pull policy is always).
	Pull bool `json:"pull,omitempty"`
	// Volume and SizeBytes are what a create-volume row creates.
	Volume    string `json:"volume,omitempty"`
	SizeBytes uint64 `json:"size_bytes,omitempty"`
}

// Plan is what a deploy will do, computed once against one Snapshot and
// executed as shown.
type Plan struct {
	Project      string   `json:"project"`
	Environment  string   `json:"environment"`
	Namespace    string   `json:"namespace"`
	Revision     int      `json:"revision,omitempty"`
	DeploymentID string   `json:"deployment_id"`
	Rows         []Row    `json:"rows"`
	Warnings     []string `json:"warnings,omitempty"`
	// PruneRefused says why undeclared Services were not removed.
	PruneRefused string `json:"prune_refused,omitempty"`
	// Services are the declared Services (for dependency skipping).
	Services []ServiceSummary `json:"services"`
	// Jobs are the scheduled jobs (x-schedule) the deploy stores instead
	// of placing Containers.
	Jobs []Job `json:"jobs,omitempty"`
}

// ServiceSummary is a declared Service in a plan.
type ServiceSummary struct {
	Name      string         `json:"name"`
	ServiceID string         `json:"service_id"`
	Mode      string         `json:"mode"`
	Desired   int            `json:"desired"`
	DependsOn []string       `json:"depends_on,omitempty"`
	Ingress   []IngressRoute `json:"ingress,omitempty"`
	// Image is the image the Service runs, a build: Service's built tag
	// included; deploy records keep it so a rollback runs the same image.
	Image string `json:"image,omitempty"`
	// Unplaced says which replicas were held because Machines were not
	// observed (the plan is then an incomplete placement).
	Unplaced []string `json:"unplaced,omitempty"`
}

// Unplaced lists every held replica of the plan.
func (p Plan) Unplaced() []string {
	var out []string
	for _, s := range p.Services {
		out = append(out, s.Unplaced...)
	}
	return out
}

// Changes counts the rows that do something.
func (p Plan) Changes() int {
	n := 0
	for _, r := range p.Rows {
		if r.Op != OpUnchanged {
			n++
		}
	}
	return n
}

// PlanOptions tune a plan.
type PlanOptions struct {
	DeploymentID string // default: a new one
	Revision     int
	// NoPrune keeps undeclared Services in the namespace.
	NoPrune bool
	// Pull is the pull policy for every Service (PullMissing, PullAlways
	// or PullNever); "" lets each Service's pull_policy decide, else
	// PullMissing.
	Pull string
	// Restart names Services whose up-to-date running Containers are
	// replaced anyway (`ployz service restart`), start-first unless a
	// host port or a single Container's volume forbids it.
	Restart []string
}

// MakePlan plans app against snap. Errors (an empty eligible set, an
// image missing everywhere, too few Machines) name the service and the
// cause; nothing has changed when one is returned.
func MakePlan(app App, snap Snapshot, o PlanOptions) (Plan, error) {
	ns := app.Namespace()
	p := Plan{Project: app.Project, Environment: app.Environment, Namespace: ns, Revision: o.Revision, DeploymentID: o.DeploymentID}
	if p.DeploymentID == "" {
		p.DeploymentID = NewID(6)
	}
	p.Warnings = append(p.Warnings, app.Warnings...)
	if !snap.Complete() {
		p.Warnings = append(p.Warnings, "not every Machine was observed: "+snap.MissingNames()+"; nothing is placed there")
	}
	p.Warnings = append(p.Warnings, downWarnings(snap)...)
	declared := map[string]bool{}
	load := map[string]int{}
	for _, m := range snap.Machines {
		for _, c := range m.Containers {
			if kind(c) != rpc.KindRun {
				load[m.ID]++
			}
		}
	}
	for _, svc := range app.Services {
		declared[svc.Name] = true
		if svc.Schedule != nil {
			rows, sum, j, warn, err := planJob(ns, svc, snap, p.DeploymentID)
			if err != nil {
				return Plan{}, fmt.Errorf("service %q: %w", svc.Name, err)
			}
			p.Rows, p.Services, p.Jobs = append(p.Rows, rows...), append(p.Services, sum), append(p.Jobs, j)
			if warn != "" {
				p.Warnings = append(p.Warnings, warn)
			}
			continue
		}
		nv, err := placeNewVolumes(ns, app, svc, snap, load)
		if err != nil {
			return Plan{}, fmt.Errorf("service %q: %w", svc.Name, err)
		}
		rows, sum, warns, err := planService(ns, svc, snap.withWriters(nv), p.DeploymentID, load, pullPolicy(o.Pull, svc), slices.Contains(o.Restart, svc.Name))
		if err != nil {
			return Plan{}, fmt.Errorf("service %q: %w", svc.Name, err)
		}
		p.Rows = append(p.Rows, createVolumeRows(svc, nv)...)
		p.Rows = append(p.Rows, rows...)
		p.Services = append(p.Services, sum)
		p.Warnings = append(p.Warnings, warns...)
		p.Warnings = append(p.Warnings, sum.Unplaced...)
	}
	markPulls(p.Rows, snap, o.Pull, app)
	p.Warnings = append(p.Warnings, routeConflicts(ns, app, snap)...)
	rw, err := routeProxies(app, snap)
	if err != nil {
		return Plan{}, err
	}
	p.Warnings = append(p.Warnings, rw...)
	prune := pruneRows(ns, snap, declared)
	switch {
	case len(prune) == 0 || o.NoPrune:
	case !snap.Complete():
		p.PruneRefused = "not pruning undeclared Services: Machines not observed: " + snap.MissingNames()
		p.Warnings = append(p.Warnings, p.PruneRefused)
	default:
		p.Rows = append(p.Rows, prune...)
	}
	return p, nil
}

func pruneRows(ns string, snap Snapshot, declared map[string]bool) []Row {
	var out []Row
	for _, m := range snap.Machines {
		for _, c := range m.Containers {
			if c.Namespace != ns || declared[c.Service] {
				continue
			}
			reason := "Service no longer declared"
			switch kind(c) {
			case rpc.KindHook:
				reason = "leftover pre-deploy hook of an undeclared Service"
			case rpc.KindRun:
				reason = "one-off run of an undeclared Service"
			}
			out = append(out, Row{MachineID: m.ID, Machine: m.Name, Service: c.Service, Op: OpRemove, Reason: reason, OldID: c.ID, OldName: c.Name})
		}
	}
	return out
}

// errVolumeUnseen: the Service's volume is on no observed Machine while
// some Machines were not observed, so it may be on one of them.
var errVolumeUnseen = errors.New("volume not seen on any observed Machine")

// eligible filters the observed Machines by the Service's constraints and
// volume locality; an empty result names what emptied it.
func eligible(ns string, svc Service, snap Snapshot) ([]MachineState, []string, error) {
	var ms, drained []MachineState
	for _, m := range snap.Machines {
		switch {
		case !m.Observed:
		case m.Drained():
			drained = append(drained, m)
		default:
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 && len(drained) == 0 {
		return nil, nil, fmt.Errorf("no Machine was observed (%s)", snap.MissingNames())
	}
	ms, err := admit(svc, snap, ms)
	if err == nil || len(drained) == 0 {
		return ms, nil, err
	}
	// Nowhere else to go: the Service stays on the drained Machines it
	// runs on rather than lose its Containers.
	var stay []MachineState
	for _, m := range drained {
		if holdsService(m, ns, svc.Name) {
			stay = append(stay, m)
		}
	}
	if len(stay) == 0 {
		return nil, nil, fmt.Errorf("%w (drained: %s)", err, names(drained))
	}
	why := "no other eligible Machine: " + err.Error()
	switch {
	case len(svc.Provisioned) > 0:
		why = "it holds the Writer of Provisioned Volume " + strings.Join(svc.Provisioned, ", ") + " (`ployz volume move` moves it)"
	case len(svc.Volumes) > 0:
		why = "volume " + strings.Join(svc.Volumes, ", ") + " is local to it (Docker volumes do not move)"
	}
	return stay, []string{fmt.Sprintf("service %q stays on drained %s: %s", svc.Name, names(stay), why)}, nil
}

// admitHost narrows ms, when svc declares host keys (spec.host), to the
// Machines whose release applies them: an older one would ignore them and
// run a Container other than the file says.
func admitHost(svc Service, ms []MachineState) ([]MachineState, error) {
	if svc.Spec.Host == nil {
		return ms, nil
	}
	return admitCapable(ms, rpc.CapContainerHost, fmt.Sprintf("service %q declares keys such as cap_add, tmpfs or ulimits, and no eligible Machine applies them", svc.Name))
}

// admitRoutes narrows ms, when svc declares a route with options (a path,
// a wildcard hostname, strip_prefix or redirect_https), to the Machines
// whose release writes them into the Container's row: an older one would
// publish the route for its whole hostname.
func admitRoutes(svc Service, ms []MachineState) ([]MachineState, error) {
	i := slices.IndexFunc(svc.Ingress, IngressRoute.Extended)
	if i < 0 {
		return ms, nil
	}
	return admitCapable(ms, rpc.CapContainerRoutes, fmt.Sprintf("x-ports route %s needs Machines that carry its path and options, and no eligible one does", svc.Ingress[i].Key()))
}

// admitRedirects narrows ms, when svc declares a redirecting route
// (x-ports redirect_from), to the Machines whose release writes its
// redirect_to into the Container's row: an older one would drop it, and
// the redirecting hostname would reach the Container.
func admitRedirects(svc Service, ms []MachineState) ([]MachineState, error) {
	i := slices.IndexFunc(svc.Ingress, IngressRoute.Redirects)
	if i < 0 {
		return ms, nil
	}
	return admitCapable(ms, rpc.CapContainerRedirects, fmt.Sprintf("x-ports route %s redirects, and no eligible Machine carries redirect_from into its rows", svc.Ingress[i].Key()))
}

// optionGate is a route option added after routes.v1: an older release
// would drop it from the Container's row (container) or ignore it in its
// Ingress Proxy (proxy) without a word, so a route using it needs both.
type optionGate struct {
	field            string // the x-ports field
	uses             func(IngressRoute) bool
	container, proxy string // capabilities
	older            string // what an older Ingress Proxy does instead
	// lacks says why a current proxy may not advertise proxy (empty: only
	// an older release lacks it).
	lacks string
}

var optionGates = []optionGate{
	{"upstream_protocol", func(r IngressRoute) bool { return r.UpstreamProtocol != "" }, rpc.CapContainerUpstreamProtocol,
		ingress.CapUpstreamProtocol, "reaches the Container over HTTP/1.1", ""},
	{"tls", func(r IngressRoute) bool { return r.TLS != "" }, rpc.CapContainerTLSOnDemand,
		ingress.CapTLSOnDemand, "obtains no certificate for the names under the wildcard",
		// A proxy advertises it only with HTTPS on, which a Machine just
		// added gets from the Cluster within seconds.
		"an older release, or HTTPS is not on there (yet, on a Machine just added: try again in a few seconds); upgrade it, turn HTTPS on"},
}

// admitOptions narrows ms, for each optionGate svc's routes use, to the
// Machines whose release carries the field into the Container's row.
func admitOptions(svc Service, ms []MachineState) ([]MachineState, error) {
	for _, g := range optionGates {
		i := slices.IndexFunc(svc.Ingress, g.uses)
		if i < 0 {
			continue
		}
		var err error
		if ms, err = admitCapable(ms, g.container, fmt.Sprintf("x-ports route %s sets %s, and no eligible Machine carries it into its rows", svc.Ingress[i].Key(), g.field)); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// admitAliases narrows ms, when svc declares network aliases, to the
// Machines whose release writes them into the Container's row: on an
// older one the alias would never name the Container.
func admitAliases(svc Service, ms []MachineState) ([]MachineState, error) {
	if len(svc.Spec.Aliases) == 0 {
		return ms, nil
	}
	return admitCapable(ms, rpc.CapContainerAliases, fmt.Sprintf("service %q declares network aliases, and no eligible Machine carries them into its rows", svc.Name))
}

// admitCapable narrows ms to the Machines advertising capability c; when
// none does, the error is why, naming the Machines to upgrade.
func admitCapable(ms []MachineState, c, why string) ([]MachineState, error) {
	keep, old := splitMachines(ms, func(m MachineState) bool { return slices.Contains(m.Capabilities, c) })
	if len(keep) == 0 {
		return nil, fmt.Errorf("%s (%s lack capability %s: they run an older release; upgrade them)", why, strings.Join(old, ", "), c)
	}
	return keep, nil
}

// admitKinds narrows ms to the Machines that accept services and carry
// every role svc needs; an error names the flag or role none satisfies.
func admitKinds(svc Service, ms []MachineState) ([]MachineState, error) {
	keep, refusing := splitMachines(ms, func(m MachineState) bool { return rpc.Accepts(m.Labels, rpc.AcceptServices) })
	if len(keep) == 0 {
		return nil, fmt.Errorf("no eligible Machine accepts services: the label %s of %s leaves services out (`ployz machine update NAME --accepts services,...`)",
			rpc.MachineLabelAccepts, strings.Join(refusing, ", "))
	}
	for _, r := range svc.Roles {
		var with []MachineState
		for _, m := range keep {
			if rpc.HasRole(m.Labels, r) {
				with = append(with, m)
			}
		}
		if len(with) == 0 {
			return nil, fmt.Errorf("x-placement.roles: no eligible Machine has role %q (of %s); give one the label %s%s, e.g. `ployz machine update NAME --label-add %s%s=true`",
				r, names(keep), rpc.MachineLabelRolePrefix, r, rpc.MachineLabelRolePrefix, r)
		}
		keep = with
	}
	return keep, nil
}

// splitMachines keeps the Machines of ms that pass ok and names the others.
func splitMachines(ms []MachineState, ok func(MachineState) bool) (keep []MachineState, others []string) {
	for _, m := range ms {
		if ok(m) {
			keep = append(keep, m)
		} else {
			others = append(others, m.Name)
		}
	}
	return keep, others
}

// holdsService reports whether m runs a Container of service.
func holdsService(m MachineState, ns, service string) bool {
	for _, c := range m.Containers {
		if c.Namespace == ns && c.Service == service && kind(c) != rpc.KindRun {
			return true
		}
	}
	return false
}

// admit narrows ms, the observed Machines that take new Containers, to
// those svc's constraints and volume locality allow.
func admit(svc Service, snap Snapshot, ms []MachineState) ([]MachineState, error) {
	if len(ms) == 0 {
		return nil, errors.New("every observed Machine is drained")
	}
	ms, err := admitKinds(svc, ms)
	if err != nil {
		return nil, err
	}
	if ms, err = admitHost(svc, ms); err != nil {
		return nil, err
	}
	if ms, err = admitRoutes(svc, ms); err != nil {
		return nil, err
	}
	if ms, err = admitRedirects(svc, ms); err != nil {
		return nil, err
	}
	if ms, err = admitOptions(svc, ms); err != nil {
		return nil, err
	}
	if ms, err = admitAliases(svc, ms); err != nil {
		return nil, err
	}
	if ms, err = admitSocketActivation(svc, ms); err != nil {
		return nil, err
	}
	for _, c := range svc.Constraints {
		var keep []MachineState
		known := false
		for _, m := range ms {
			v, has := rpc.ConstraintValue(m.Name, m.Labels, c.Label)
			known = known || has
			if c.Op == "==" && has && v == c.Value || c.Op == "!=" && v != c.Value {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			if !known && c.Op == "==" {
				return nil, fmt.Errorf("x-placement constraint %s: no observed Machine has label %q", ConstraintString(c), c.Label)
			}
			return nil, fmt.Errorf("x-placement constraint %s leaves no eligible Machine (of %s)", ConstraintString(c), names(ms))
		}
		ms = keep
	}
	ms, err = admitDockerVolumes(svc, snap, ms)
	if err != nil {
		return nil, err
	}
	ms, err = admitProvisioned(svc, snap, ms)
	if err != nil {
		return nil, err
	}
	return ms, nil
}

// admitDockerVolumes narrows ms to the Machines holding svc's named
// Docker volumes, when one does.
func admitDockerVolumes(svc Service, snap Snapshot, ms []MachineState) ([]MachineState, error) {
	if len(svc.Volumes) == 0 {
		return ms, nil
	}
	var holders []MachineState
	for _, m := range snap.Machines {
		if holdsAny(m.Volumes, svc.Volumes) {
			holders = append(holders, m)
		}
	}
	if len(holders) == 0 {
		if !snap.Complete() {
			return nil, errVolumeUnseen
		}
		return ms, nil
	}
	var keep []MachineState
	for _, m := range ms {
		if holdsAny(m.Volumes, svc.Volumes) {
			keep = append(keep, m)
		}
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("volume locality: volume %s is on %s, which the placement constraints exclude", strings.Join(svc.Volumes, ", "), names(holders))
	}
	return keep, nil
}

// admitProvisioned narrows ms to the one Machine whose copy of each
// Provisioned Volume svc mounts is the Writer: every other Machine's
// admission refuses the Container, so placing it there would only fail
// later (design: Machine-local admission).
func admitProvisioned(svc Service, snap Snapshot, ms []MachineState) ([]MachineState, error) {
	if len(svc.Provisioned) == 0 {
		return ms, nil
	}
	first := svc.Provisioned[0]
	at, err := provisionedWriter(first, snap)
	if err != nil {
		return nil, err
	}
	for _, name := range svc.Provisioned[1:] {
		w, err := provisionedWriter(name, snap)
		if err != nil {
			return nil, err
		}
		if w.ID != at.ID {
			return nil, fmt.Errorf("volume locality: Provisioned Volume %s has its Writer on %s and %s on %s: one Container cannot mount both (`ployz volume move` one of them)",
				first, at.Name, name, w.Name)
		}
	}
	for _, m := range ms {
		if m.ID == at.ID {
			return []MachineState{m}, nil
		}
	}
	return nil, fmt.Errorf("volume locality: Provisioned Volume %s has its Writer on %s, which the placement excludes (eligible: %s); only the Writer's Machine admits it: `ployz volume move %s --to MACHINE` moves it",
		strings.Join(svc.Provisioned, ", "), at.Name, names(ms), first)
}

// provisionedWriter is the observed Machine whose copy of name is the
// Writer; errVolumeUnseen when none is and a Machine was not observed.
func provisionedWriter(name string, snap Snapshot) (MachineState, error) {
	var ws []MachineState
	for _, m := range snap.Machines {
		if slices.Contains(m.Writers, name) {
			ws = append(ws, m)
		}
	}
	switch {
	case len(ws) == 1:
		return ws[0], nil
	case len(ws) > 1:
		return MachineState{}, fmt.Errorf("volume locality: Provisioned Volume %s has a Writer on each of %s: a deploy refuses to choose (`ployz volume ls %s`)", name, names(ws), name)
	case !snap.Complete():
		return MachineState{}, errVolumeUnseen
	}
	return MachineState{}, fmt.Errorf("%w of Provisioned Volume %s: create it with `ployz volume create %s --machine MACHINE --size SIZE`, or declare it in the compose file with driver: %s and driver_opts.size", errNoWriter, name, name, DriverZFS)
}

// errNoWriter: every Machine was observed and none holds the Writer.
var errNoWriter = errors.New("volume locality: no Machine holds the Writer")

func holdsAny(have, want []string) bool {
	for _, w := range want {
		for _, h := range have {
			if h == w {
				return true
			}
		}
	}
	return false
}

func names(ms []MachineState) string {
	var n []string
	for _, m := range ms {
		n = append(n, m.Name)
	}
	return strings.Join(n, ", ")
}

// Running reports whether a Container counts as serving now (Docker
// restarting it counts: it is coming back on its own).
func Running(c rpc.ContainerObservation) bool {
	return c.State == "running" || c.State == "restarting"
}

func sortByName(ms []MachineState) {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name || ms[i].Name == ms[j].Name && ms[i].ID < ms[j].ID })
}

// proxyGate is what an Ingress Proxy must advertise to serve the routes
// matching uses: what names them in messages, older what a proxy without
// it does instead.
type proxyGate struct {
	uses        func(IngressRoute) bool
	capability  string
	what, older string
	lacks       string // why a proxy may lack capability (default: an older release)
}

var proxyGates = append([]proxyGate{
	{IngressRoute.Extended, ingress.CapRoutes, "a path or options", "serves the route as its whole hostname", ""},
	{IngressRoute.Redirects, ingress.CapRedirects, "a redirect (redirect_from)", "proxies the redirecting hostname to the Container", ""},
}, optionProxyGates()...)

// optionProxyGates are the optionGates as proxy gates: each names its
// field, so the refusal says which one the older proxy would ignore.
func optionProxyGates() []proxyGate {
	gs := make([]proxyGate, 0, len(optionGates))
	for _, g := range optionGates {
		gs = append(gs, proxyGate{g.uses, g.proxy, "the field " + g.field, g.older, g.lacks})
	}
	return gs
}

// routeProxies refuses routes with options (IngressRoute.Extended) while
// a Machine that accepts ingress runs an Ingress Proxy without
// ingress.CapRoutes: it would serve a path route as its whole hostname;
// likewise redirecting routes without ingress.CapRedirects (it would
// proxy them), and each optionGate's field without its capability. A Machine that advertises no ingress at the moment (its
// proxy restarting, or Down) cannot be told apart from one that would: a
// warning says so.
func routeProxies(app App, snap Snapshot) ([]string, error) {
	var warns []string
	for _, g := range proxyGates {
		w, err := g.check(app, snap)
		if err != nil {
			return nil, err
		}
		warns = append(warns, w...)
	}
	return warns, nil
}

// check applies one gate to the first of app's routes that needs it.
func (g proxyGate) check(app App, snap Snapshot) ([]string, error) {
	var first IngressRoute
	for _, svc := range app.Services {
		if i := slices.IndexFunc(svc.Ingress, g.uses); i >= 0 {
			first = svc.Ingress[i]
			break
		}
	}
	if first.Hostname == "" {
		return nil, nil
	}
	var old, unknown []string
	for _, m := range snap.Machines {
		switch {
		case !rpc.Accepts(m.Labels, rpc.AcceptIngress) || slices.Contains(m.Capabilities, g.capability):
		case m.Membership != "down" && slices.Contains(m.Capabilities, ingress.CapHTTP):
			old = append(old, m.Name)
		default:
			unknown = append(unknown, m.Name)
		}
	}
	if len(old) > 0 {
		lacks := g.lacks
		if lacks == "" {
			lacks = "an older release; upgrade it"
		}
		return nil, fmt.Errorf("x-ports route %s has %s the Ingress Proxy of %s does not serve (no capability %s: %s, or take ingress off it with `ployz machine update NAME --accepts services`)",
			first.Key(), g.what, strings.Join(old, ", "), g.capability, lacks)
	}
	if len(unknown) > 0 {
		return []string{fmt.Sprintf("x-ports route %s has %s, and whether the Ingress Proxy of %s serves them is unknown (it advertises no ingress now); an older release %s",
			first.Key(), g.what, strings.Join(unknown, ", "), g.older)}, nil
	}
	return nil, nil
}

// routeConflicts warns about ingress routes the app declares that another
// Service's observed Containers already claim: the Ingress Proxies keep
// serving the current owner and report a conflict until one drops it.
func routeConflicts(ns string, app App, snap Snapshot) []string {
	claims := map[string]map[string]bool{} // route key -> other services
	for _, m := range snap.Machines {
		for _, c := range m.Containers {
			if c.Spec == nil {
				continue
			}
			for _, r := range c.Spec.Ingress {
				k := IngressRoute(r).Key()
				if claims[k] == nil {
					claims[k] = map[string]bool{}
				}
				claims[k][c.Namespace+"/"+c.Service] = true
			}
		}
	}
	var out []string
	for _, svc := range app.Services {
		for _, r := range svc.Ingress {
			var others []string
			for o := range claims[r.Key()] {
				if o != ns+"/"+svc.Name {
					others = append(others, o)
				}
			}
			if len(others) > 0 {
				sort.Strings(others)
				out = append(out, fmt.Sprintf("service %q: ingress route %s is already claimed by %s: the Ingress Proxies keep serving it and report a conflict until one of them drops the route",
					svc.Name, r.Key(), strings.Join(others, ", ")))
			}
		}
	}
	return out
}
