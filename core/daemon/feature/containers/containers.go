package containers

// Service Container commands (core/rpc/containers.go): the daemon admits
// each creation against its own fresh facts and otherwise does only what
// it is told. Docker is the only source of truth for what exists.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/images"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/mesh/dockernet"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// Facts are the Machine facts admission and observation read, fresh
// on every call.
type Facts struct {
	MachineID string
	Name      string
	Phase     machine.Phase
	Labels    map[string]string
	// DNS is the resolver Containers get (the Machine gateway), or empty.
	DNS string
	// Copies are this Machine's volume copies (admitVolumes).
	Copies map[string]volumecopy.Copy
}

// Ops serves the Service Container commands against one Docker.
type Ops struct {
	log     hclog.Logger
	docker  client.APIClient
	network string // Docker network Containers join (default "ployz")
	// filesDir keeps files shipped with deploys, by digest.
	filesDir string
	// filesMu keeps a sweep of filesDir (sweepFiles) from removing a
	// file between its materialize and the create of the Container
	// that mounts it.
	filesMu sync.Mutex
	facts   func() Facts
	ready   *readiness
	act     *activation // socket-activated ports (sockact.go)
	exits   *exitLog
	// started, when set, hears each Container start_container started;
	// it must not block (the daemon publishes the row in the background).
	started func(id string)
	// logsHeld reports whether the Log Store holds a line of Container id
	// at or after since (unix nanoseconds); nil: there is none to wait
	// for. An ended one-off run is removed once it does.
	logsHeld func(ctx context.Context, id string, since int64) (bool, error)
	// runs are the one-off runs this process relays (run.go).
	runs runRegistry
	// rows is where the observe loop publishes (observe.go); nil: nowhere.
	rows Rows

	restoreMu   sync.Mutex
	restoreDone bool
}

// Config configures Ops.
type Config struct {
	Docker    client.APIClient
	Network   string // default dockernet.DefaultName
	NotifyDir string // default /run/ployz/notify
	// ActivateDir holds the socket activation sockets (default
	// /run/ployz/activate); Launcher returns the host path of the
	// launcher binary socket-activated Containers start with.
	ActivateDir string
	Launcher    func() (string, error)
	StatePath   string // readiness verdicts; empty: not persisted
	FilesDir    string // shipped files; empty: refused
	Facts       func() Facts
	Logger      hclog.Logger
	Started     func(id string)
	LogsHeld    func(ctx context.Context, id string, since int64) (bool, error)
	// Rows is where the observe loop publishes this Machine's containers
	// and volumes rows; nil: PublishContainer and the loop write nothing.
	Rows Rows
}

// New makes the Container commands over c.Docker (nil: every command
// answers unavailable), filling in Config's defaults.
func New(c Config) *Ops {
	if c.Network == "" {
		c.Network = dockernet.DefaultName
	}
	if c.NotifyDir == "" {
		c.NotifyDir = "/run/ployz/notify"
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	o := &Ops{log: c.Logger, docker: c.Docker, network: c.Network, facts: c.Facts, filesDir: c.FilesDir,
		exits: newExitLog(), started: c.Started, logsHeld: c.LogsHeld, rows: c.Rows}
	o.ready = newReadiness(c.Logger.Named("notify"), c.NotifyDir, c.StatePath, o.runningSince)
	if c.ActivateDir == "" {
		c.ActivateDir = "/run/ployz/activate"
	}
	if c.Launcher == nil {
		c.Launcher = func() (string, error) { return "", errors.New("no launcher configured") }
	}
	o.act = newActivation(c.Logger.Named("sockact"), c.ActivateDir, c.Launcher, o.runningSince)
	return o
}

// Routes lists the Service Container routes.
func (o *Ops) Routes() []rpc.Route {
	routes := []rpc.Route{
		rpc.Bind(rpc.ListContainers, o.listContainers),
		rpc.Bind(rpc.CreateContainer, o.createContainer),
		rpc.Bind(rpc.StartContainer, o.startContainer),
		rpc.Bind(rpc.WaitReady, o.waitReady),
		rpc.Bind(rpc.StopContainer, o.stopContainer),
		rpc.Bind(rpc.RemoveContainer, o.removeContainer),
		rpc.Bind(rpc.ExportContainer, o.exportContainer),
	}
	for i := range routes {
		routes[i].Available = func() bool { return o.docker != nil }
	}
	return routes
}

// restore re-binds notify sockets of existing Containers, once per daemon
// (retried by the next caller when Docker did not answer).
func (o *Ops) restore(ctx context.Context) {
	o.restoreMu.Lock()
	defer o.restoreMu.Unlock()
	if o.restoreDone {
		return
	}
	list, err := o.docker.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", rpc.LabelReadiness+"="+readinessNotify))})
	if err != nil {
		o.log.Warn("notify: restore: list containers", "error", err)
		return
	}
	dirs, started := map[string]string{}, map[string]string{}
	for _, c := range list {
		for _, m := range c.Mounts {
			if m.Destination == notifyMountTarget {
				dirs[c.ID] = m.Source
			}
		}
		if run, ok := o.runningSince(ctx, c.ID); ok {
			started[c.ID] = run.StartedAt
		}
	}
	o.ready.restore(dirs, started)
	if err := o.restoreActivation(ctx); err != nil {
		o.log.Warn("socket activation: restore: list containers", "error", err)
		return
	}
	o.restoreDone = true
}

// runningSince describes Container id's current run when it is running.
func (o *Ops) runningSince(ctx context.Context, id string) (runInfo, bool) {
	c, err := o.docker.ContainerInspect(ctx, id)
	if err != nil || c.State == nil || !c.State.Running {
		return runInfo{}, false
	}
	return runInfo{StartedAt: c.State.StartedAt, Pid: c.State.Pid}, true
}

// dockerErr maps a Docker error to an rpc error naming what failed.
func dockerErr(err error, format string, args ...any) error {
	return feature.DockerErr(err, format, args...)
}

// pull pulls an image into this Machine's Docker, as pull_image does
// (feature/images).
func (o *Ops) pull(ctx context.Context, req rpc.PullImageRequest, report func(rpc.PullProgress)) (rpc.PullImageResult, error) {
	return images.Pull(ctx, o.docker, o.log, o.facts().Name, req, report)
}

// inspect finds a Container by ID or name, refusing an empty reference.
func (o *Ops) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	if id == "" {
		return container.InspectResponse{}, rpc.InvalidField("id", "is empty")
	}
	c, err := o.docker.ContainerInspect(ctx, id)
	if err != nil {
		return c, dockerErr(err, "container %s", id)
	}
	return c, nil
}

// observe is a Container as this Machine sees it now.
func (o *Ops) observe(c container.InspectResponse, machineID string) rpc.ContainerObservation {
	// A one-off run is never ready: no DNS name or ingress route leads
	// to it, whatever its row says of its Service.
	ob := rpc.ContainerObservation{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/"), MachineID: machineID, ImageID: c.Image,
		Ready: o.ready.verdict(c) && !isRun(c), Health: "none"}
	if c.Config != nil {
		l := c.Config.Labels
		ob.Namespace, ob.Service, ob.ServiceID = l[rpc.LabelNamespace], l[rpc.LabelService], l[rpc.LabelServiceID]
		ob.Deployment, ob.SpecHash, ob.Image = l[rpc.LabelDeployment], l[rpc.LabelSpecHash], c.Config.Image
		if l[rpc.LabelSpec] != "" {
			if spec, err := labelSpec(l); err == nil {
				ob.Spec = &spec
			}
		}
		ob.Labels = maps.Clone(l)
		delete(ob.Labels, rpc.LabelSpec)
	}
	ob.RestartCount = c.RestartCount
	if st := c.State; st != nil {
		ob.State, ob.ExitCode, ob.OOMKilled = st.Status, st.ExitCode, st.OOMKilled
		ob.StartedAt, ob.FinishedAt = dockerTime(st.StartedAt), dockerTime(st.FinishedAt)
		if st.Health != nil && st.Health.Status != "" {
			ob.Health = st.Health.Status
		}
	}
	o.exits.fill(&ob)
	if c.NetworkSettings != nil {
		if n := c.NetworkSettings.Networks[o.network]; n != nil {
			ob.IP = n.IPAddress
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, c.Created); err == nil {
		ob.CreatedAt = t.Unix()
	}
	return ob
}

func (o *Ops) listContainers(ctx context.Context, req rpc.ListContainersRequest) (rpc.ContainerList, error) {
	o.restore(ctx)
	f := o.facts()
	label := rpc.LabelNamespace
	if req.Namespace != "" {
		label += "=" + req.Namespace
	}
	list, err := o.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		return rpc.ContainerList{}, dockerErr(err, "list containers")
	}
	out := rpc.ContainerList{MachineID: f.MachineID, Containers: []rpc.ContainerObservation{}, Volumes: []string{}, Labels: f.Labels}
	exist := map[string]bool{}
	for _, s := range list {
		exist[s.ID] = true
		if s.Labels[rpc.LabelKind] == rpc.KindRun && !req.OneOffs {
			continue
		}
		c, err := o.docker.ContainerInspect(ctx, s.ID)
		if cerrdefs.IsNotFound(err) {
			continue // removed since the listing
		}
		if err != nil {
			return rpc.ContainerList{}, dockerErr(err, "inspect container %s", short(s.ID))
		}
		out.Containers = append(out.Containers, o.observe(c, f.MachineID))
	}
	if req.Namespace == "" {
		o.ready.prune(exist)
		o.act.prune(exist)
	}
	out.Writers = writerCopies(f.Copies)
	vols, err := o.docker.VolumeList(ctx, volume.ListOptions{})
	if err != nil {
		return rpc.ContainerList{}, dockerErr(err, "list volumes")
	}
	for _, v := range vols.Volumes {
		out.Volumes = append(out.Volumes, v.Name)
	}
	return out, nil
}

func (o *Ops) createContainer(ctx context.Context, req rpc.CreateContainerRequest) (rpc.ContainerObservation, error) {
	if req.Spec.Kind == rpc.KindRun {
		return rpc.ContainerObservation{}, rpc.InvalidField("spec.kind", "a Container of kind %s is created by %s, which also removes it", rpc.KindRun, rpc.CmdRunContainer)
	}
	return o.create(ctx, req, nil)
}

// create is create_container's path, also run_container's: validation,
// admission against this Machine's facts, the image check, volumes and
// shipped files, then Docker's create. tweak, when set, adjusts Docker's
// request last (a run's terminal and labels).
func (o *Ops) create(ctx context.Context, req rpc.CreateContainerRequest, tweak func(*dockerCreate)) (rpc.ContainerObservation, error) {
	none := rpc.ContainerObservation{}
	spec, err := validateSpec(req)
	if err != nil {
		return none, err
	}
	o.restore(ctx)
	f := o.facts()
	if err := admit(spec, f); err != nil {
		return none, err
	}
	img, err := o.docker.ImageInspect(ctx, spec.Image)
	if cerrdefs.IsNotFound(err) {
		return none, rpc.Errorf(rpc.CodeNotFound, "image %s is not on machine %s (deploy pulls it from its registry, or push it with `ployz image push`)", spec.Image, f.Name).
			With("image", spec.Image)
	}
	if err != nil {
		return none, dockerErr(err, "inspect image %s", spec.Image)
	}
	if spec.Readiness == readinessHealthcheck && spec.Healthcheck == nil &&
		(img.Config == nil || img.Config.Healthcheck == nil || len(img.Config.Healthcheck.Test) == 0 || img.Config.Healthcheck.Test[0] == "NONE") {
		return none, rpc.InvalidField("spec.healthcheck", "readiness healthcheck needs a healthcheck, and image %s has none", spec.Image)
	}
	if err := o.ensureVolumes(ctx, spec); err != nil {
		return none, err
	}
	// The files lock keeps a sweep from removing shipped files between
	// writing them and the create that mounts them; a Container without
	// shipped files mounts none, so concurrent creates need not queue.
	unlock := func() {}
	var shipped []mount.Mount
	if len(spec.Files) > 0 {
		o.filesMu.Lock()
		unlock = sync.OnceFunc(o.filesMu.Unlock)
		defer unlock()
		if shipped, err = materialize(o.filesDir, spec.Files, req.Files); err != nil {
			return none, err
		}
	}
	var ns *notifySock
	notifyDir := ""
	if spec.Readiness == readinessNotify {
		if ns, err = o.ready.open(); err != nil {
			return none, err
		}
		notifyDir = ns.dir
	}
	dc := buildCreate(spec, o.network, f.DNS, notifyDir)
	dc.host.Mounts = append(dc.host.Mounts, shipped...)
	as, err := o.activate(spec, img, &dc, f.Name)
	if err != nil {
		if ns != nil {
			ns.close()
		}
		return none, err
	}
	if tweak != nil {
		tweak(&dc)
	}
	res, err := o.docker.ContainerCreate(ctx, dc.config, dc.host, dc.network, nil, req.Name)
	unlock()
	if err != nil {
		if ns != nil {
			ns.close()
		}
		if as != nil {
			o.act.discard(as)
		}
		return none, dockerErr(err, "create container %s", req.Name)
	}
	if ns != nil {
		o.ready.attach(ns, res.ID)
	}
	if as != nil {
		o.act.attach(as, res.ID)
	}
	for _, w := range res.Warnings {
		o.log.Warn("create container", "name", req.Name, "warning", w)
	}
	o.log.Info("container created", "name", req.Name, "id", short(res.ID), "namespace", spec.Namespace, "service", spec.Service)
	c, err := o.inspect(ctx, res.ID)
	if err != nil {
		return none, err
	}
	return o.observe(c, f.MachineID), nil
}

// ensureVolumes creates the spec's named volumes missing on this Machine.
// An anonymous volume (no source: compose's `- /app/node_modules`) is
// Docker's to create with the Container, and removed with it.
func (o *Ops) ensureVolumes(ctx context.Context, spec rpc.ContainerSpec) error {
	for _, m := range spec.Mounts {
		if m.Type != "volume" || m.Source == "" {
			continue
		}
		_, err := o.docker.VolumeInspect(ctx, m.Source)
		if err == nil {
			continue
		}
		if !cerrdefs.IsNotFound(err) {
			return dockerErr(err, "inspect volume %s", m.Source)
		}
		if _, err := o.docker.VolumeCreate(ctx, volume.CreateOptions{Name: m.Source,
			Labels: map[string]string{rpc.LabelNamespace: spec.Namespace}}); err != nil {
			return dockerErr(err, "create volume %s", m.Source)
		}
		o.log.Info("volume created", "volume", m.Source, "namespace", spec.Namespace)
	}
	return nil
}

func (o *Ops) startContainer(ctx context.Context, req rpc.ContainerRef) (rpc.ContainerObservation, error) {
	return o.start(ctx, req.ID)
}

// start is start_container's step, also a volume_task's: the same
// checks either way.
func (o *Ops) start(ctx context.Context, id string) (rpc.ContainerObservation, error) {
	o.restore(ctx)
	c, err := o.inspect(ctx, id)
	if err != nil {
		return rpc.ContainerObservation{}, err
	}
	if err := o.docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return rpc.ContainerObservation{}, dockerErr(err, "start container %s", id)
	}
	if o.started != nil {
		o.started(c.ID)
	}
	return o.observeID(ctx, c.ID)
}

func (o *Ops) stopContainer(ctx context.Context, req rpc.StopContainerRequest) (rpc.ContainerObservation, error) {
	if err := validStop(req, ""); err != nil {
		return rpc.ContainerObservation{}, err
	}
	return o.stop(ctx, req)
}

// validStop checks a stop request; prefix is where it sits in the
// request ("stop." in a volume_task).
func validStop(req rpc.StopContainerRequest, prefix string) error {
	if req.GracePeriodSeconds < 0 {
		return rpc.InvalidField(prefix+"grace_period_seconds", "%d is negative", req.GracePeriodSeconds)
	}
	return nil
}

// stop is stop_container's step, also a volume_task's.
func (o *Ops) stop(ctx context.Context, req rpc.StopContainerRequest) (rpc.ContainerObservation, error) {
	c, err := o.inspect(ctx, req.ID)
	if err != nil {
		return rpc.ContainerObservation{}, err
	}
	opts := container.StopOptions{}
	if req.GracePeriodSeconds > 0 {
		opts.Timeout = &req.GracePeriodSeconds
	}
	if err := o.docker.ContainerStop(ctx, c.ID, opts); err != nil {
		return rpc.ContainerObservation{}, dockerErr(err, "stop container %s", req.ID)
	}
	return o.observeID(ctx, c.ID)
}

func (o *Ops) removeContainer(ctx context.Context, req rpc.RemoveContainerRequest) (rpc.ContainerRemoved, error) {
	id, err := o.remove(ctx, req.ID, req.Force)
	if err != nil {
		return rpc.ContainerRemoved{}, err
	}
	return rpc.ContainerRemoved{Removed: id}, nil
}

// remove is remove_container's step, also a one-off run's: the Container
// with its anonymous volumes, its readiness verdict, and the shipped
// files no Container mounts any more. It answers the Container's id.
func (o *Ops) remove(ctx context.Context, ref string, force bool) (string, error) {
	c, err := o.inspect(ctx, ref)
	if err != nil {
		return "", err
	}
	if err := o.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: force, RemoveVolumes: true}); err != nil {
		return "", dockerErr(err, "remove container %s", ref)
	}
	o.ready.forget(c.ID)
	o.act.forget(c.ID)
	o.log.Info("container removed", "name", strings.TrimPrefix(c.Name, "/"), "id", short(c.ID))
	if err := o.sweepFiles(ctx); err != nil {
		o.log.Warn("remove unused shipped files", "error", err)
	}
	return c.ID, nil
}

// exportContainer answers the spec a Service Container was created with:
// its ployz.spec label, with the environment values the label redacts
// read back from Docker's config for the same keys.
func (o *Ops) exportContainer(ctx context.Context, req rpc.ExportContainerRequest) (rpc.ContainerExport, error) {
	c, err := o.inspect(ctx, req.ID)
	if err != nil {
		return rpc.ContainerExport{}, err
	}
	spec, err := exportedSpec(c)
	if err != nil {
		return rpc.ContainerExport{}, err
	}
	ex := rpc.ContainerExport{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/"), Spec: spec}
	if req.WithFiles {
		ex.Files = o.shippedContent(spec.Files)
	}
	return ex, nil
}

func (o *Ops) observeID(ctx context.Context, id string) (rpc.ContainerObservation, error) {
	c, err := o.inspect(ctx, id)
	if err != nil {
		return rpc.ContainerObservation{}, err
	}
	return o.observe(c, o.facts().MachineID), nil
}

// dockerTime is a Docker state timestamp, empty for Docker's zero time
// (a Container never started or never exited).
func dockerTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// writerCopies are the volumes whose copy is the Writer, sorted.
func writerCopies(cs map[string]volumecopy.Copy) []string {
	var out []string
	for name, c := range cs {
		if c.RoleOf() == volumecopy.Writer {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
