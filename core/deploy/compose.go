package deploy

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/distribution/reference"
	"go.yaml.in/yaml/v4"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/volume"
)

// Source is one compose file to load.
type Source struct {
	Compose     []byte
	Filename    string // for messages and relative paths; default compose.yaml
	WorkingDir  string // default "."
	ProjectName string // overrides the file's name:
	Environment string // default "production"
	// Env is the interpolation environment (${VAR}); nil: none.
	Env map[string]string
	// DeclarationsOnly skips reading shipped files (configs, secrets,
	// relative bind mounts): for commands that only read what a saved
	// compose file declares, wherever they run.
	DeclarationsOnly bool
}

// DefaultEnvironment is the environment a deploy targets without --env.
const DefaultEnvironment = "production"

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Load parses a compose file with its Ployz extensions into an App. Bad
// input is an error naming the service and field; nothing is contacted.
func Load(ctx context.Context, src Source) (App, error) {
	if src.Filename == "" {
		src.Filename = "compose.yaml"
	}
	if src.WorkingDir == "" {
		src.WorkingDir = "."
	}
	env := src.Environment
	if env == "" {
		env = DefaultEnvironment
	}
	if !nameRE.MatchString(env) {
		return App{}, fmt.Errorf("environment %q: want lowercase letters, digits, - and _", env)
	}
	if err := refusePortRanges(src.Compose); err != nil {
		return App{}, err
	}
	details := types.ConfigDetails{
		WorkingDir:  src.WorkingDir,
		ConfigFiles: []types.ConfigFile{{Filename: src.Filename, Content: src.Compose}},
		Environment: types.Mapping(src.Env),
	}
	opts := func(o *loader.Options) {
		if src.ProjectName != "" {
			o.SetProjectName(src.ProjectName, true)
		}
		o.SkipInclude = true
		o.ResolvePaths = false
	}
	var raw map[string]any
	var proj *types.Project
	loadWarns, err := captureComposeWarnings(src.Compose, func() error {
		var err error
		raw, err = loader.LoadModelWithContext(ctx, details, opts, func(o *loader.Options) {
			o.SkipNormalization, o.SkipDefaultValues, o.SkipConsistencyCheck, o.SkipValidation = true, true, true, true
		})
		if err != nil {
			return err
		}
		proj, err = loader.LoadWithContext(ctx, details, opts)
		return err
	})
	if err != nil {
		return App{}, fmt.Errorf("%s: %w", src.Filename, err)
	}
	name := src.ProjectName
	if name == "" {
		name = proj.Name
	}
	if name == "" {
		return App{}, errors.New("project name: set `name:` in the compose file or pass --project-name")
	}
	if !nameRE.MatchString(name) {
		return App{}, fmt.Errorf("project name %q: want lowercase letters, digits, - and _", name)
	}
	keyWarns, err := checkKeys(raw)
	if err != nil {
		return App{}, err
	}
	app := App{Project: name, Environment: env, Warnings: append(loadWarns, keyWarns...), Files: map[string][]byte{}}
	app.Warnings = append(app.Warnings, networkWarnings(proj.Networks)...)
	pvs, err := provisionedVolumes(app.Namespace(), proj.Volumes, raw)
	if err != nil {
		return App{}, err
	}
	app.Provisioned = pvs.list()
	sh := &shipper{dir: src.WorkingDir, proj: proj, env: src.Env, files: app.Files}
	for _, s := range proj.Services {
		svc, warns, err := buildService(app.Namespace(), s, pvs, proj.Networks)
		if err == nil && !src.DeclarationsOnly {
			err = sh.service(&svc, s)
		}
		if err == nil && s.Build != nil {
			if svc.Build, err = buildOf(src.WorkingDir, app.Namespace(), s, proj.Secrets); err == nil {
				svc.Spec.Image = svc.Build.Repo
			}
		}
		if err != nil {
			return App{}, fmt.Errorf("service %q: %w", s.Name, err)
		}
		app.Warnings = append(app.Warnings, warns...)
		app.Warnings = append(app.Warnings, sh.warns...)
		sh.warns = nil
		app.Services = append(app.Services, svc)
	}
	if len(app.Services) == 0 {
		return App{}, fmt.Errorf("%s: no services declared", src.Filename)
	}
	if app.Services, err = dependencyOrder(app.Services); err != nil {
		return App{}, err
	}
	sort.Strings(app.Warnings)
	return app, nil
}

func buildService(ns string, s types.ServiceConfig, pvs declaredVolumes, nets types.Networks) (Service, []string, error) {
	if !nameRE.MatchString(s.Name) {
		return Service{}, nil, fmt.Errorf("name: want lowercase letters, digits, - and _")
	}
	if s.Image == "" && s.Build == nil {
		return Service{}, nil, errors.New("image: required, or build:")
	}
	svc := Service{Name: s.Name, Mode: ModeReplicated, Replicas: 1}
	spec := rpc.ContainerSpec{
		Namespace: ns, Service: s.Name, Kind: "service", Image: s.Image,
		Entrypoint: s.Entrypoint, Command: s.Command,
		WorkingDir: s.WorkingDir, User: s.User, Restart: "unless-stopped",
	}
	if err := applyEnvAndLabels(&spec, s); err != nil {
		return Service{}, nil, err
	}
	if err := applyPolicies(&svc, &spec, s); err != nil {
		return Service{}, nil, err
	}
	applyReplicasAndLimits(&svc, &spec, s)
	if err := applyPorts(&svc, &spec, s.Ports); err != nil {
		return Service{}, nil, err
	}
	if err := applyVolumes(ns, &svc, &spec, s.Volumes, pvs); err != nil {
		return Service{}, nil, err
	}
	hw, err := hostKeys(&spec, s)
	if err != nil {
		return Service{}, nil, err
	}
	nw, err := applyNetworks(ns, &spec, s, nets)
	if err != nil {
		return Service{}, nil, err
	}
	hw = append(hw, nw...)
	sw, err := swarmDeploy(&svc, &spec, s.Deploy)
	if err != nil {
		return Service{}, nil, err
	}
	hostWarns := append(hw, sw...)
	for i, w := range hostWarns {
		hostWarns[i] = fmt.Sprintf("service %q: %s", s.Name, w)
	}
	hasHC := applyHealthcheck(&spec, s.HealthCheck)
	for dep := range s.DependsOn {
		svc.DependsOn = append(svc.DependsOn, dep)
	}
	sort.Strings(svc.DependsOn)
	warns, err := applyExtensions(&svc, &spec, s.Extensions, hasHC)
	if err != nil {
		return Service{}, nil, err
	}
	if hp := clashingHostPorts(Service{HostPorts: svc.HostPorts, Spec: spec}); svc.UpdateOrder == StartFirst && len(hp) > 0 {
		hostWarns = append(hostWarns, fmt.Sprintf("service %q: deploy.update_config.order start-first: replaced stop-first, since host port %s cannot be bound twice", s.Name, joinInts(hp)))
	}
	mw, err := checkMode(svc)
	if err != nil {
		return Service{}, nil, err
	}
	if err := checkJob(svc); err != nil {
		return Service{}, nil, err
	}
	svc.Spec = spec
	return svc, append(append(warns, mw...), hostWarns...), nil
}

// applyEnvAndLabels copies environment and labels; a variable without a
// value and a label in the reserved ployz. prefix are refused.
func applyEnvAndLabels(spec *rpc.ContainerSpec, s types.ServiceConfig) error {
	if len(s.Environment) > 0 {
		spec.Env = map[string]string{}
		for k, v := range s.Environment {
			if v == nil {
				return fmt.Errorf("environment.%s: no value (set it or remove it)", k)
			}
			spec.Env[k] = *v
		}
	}
	if len(s.Labels) > 0 {
		spec.Labels = map[string]string{}
		for k, v := range s.Labels {
			if strings.HasPrefix(k, "ployz.") {
				return fmt.Errorf("labels.%s: the ployz. prefix is reserved", k)
			}
			spec.Labels[k] = v
		}
	}
	return nil
}

// applyPolicies reads restart, pull_policy and stop_grace_period.
func applyPolicies(svc *Service, spec *rpc.ContainerSpec, s types.ServiceConfig) error {
	switch name, n, _ := strings.Cut(s.Restart, ":"); {
	case s.Restart == "", s.Restart == "unless-stopped":
	case s.Restart == "always", s.Restart == "on-failure", s.Restart == "no":
		spec.Restart = s.Restart
	case name == "on-failure" && isCount(n):
		spec.Restart = s.Restart
	default:
		return fmt.Errorf("restart: %q is not one of no, always, on-failure, unless-stopped", s.Restart)
	}
	switch s.PullPolicy {
	case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent:
	case types.PullPolicyAlways, types.PullPolicyNever:
		svc.PullPolicy = s.PullPolicy
	default:
		return fmt.Errorf("pull_policy: %q is not always, missing or never", s.PullPolicy)
	}
	if s.StopGracePeriod != nil {
		svc.StopGraceSeconds = int(time.Duration(*s.StopGracePeriod).Seconds())
	}
	return nil
}

// applyReplicasAndLimits reads deploy (mode, replicas, resource limits),
// scale and mem_limit.
func applyReplicasAndLimits(svc *Service, spec *rpc.ContainerSpec, s types.ServiceConfig) {
	if s.Deploy != nil {
		if s.Deploy.Mode != "" {
			svc.Mode = s.Deploy.Mode
		}
		if s.Deploy.Replicas != nil {
			svc.Replicas = *s.Deploy.Replicas
		}
		if l := s.Deploy.Resources.Limits; l != nil {
			spec.CPUs = float64(l.NanoCPUs)
			spec.MemoryBytes = int64(l.MemoryBytes)
		}
	}
	if s.Scale != nil {
		svc.Replicas = *s.Scale
	}
	if s.MemLimit > 0 && spec.MemoryBytes == 0 {
		spec.MemoryBytes = int64(s.MemLimit)
	}
}

// applyHealthcheck copies an enabled healthcheck and reports whether
// there is one.
func applyHealthcheck(spec *rpc.ContainerSpec, hc *types.HealthCheckConfig) bool {
	if hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
		return false
	}
	spec.Healthcheck = &rpc.Healthcheck{Test: hc.Test, IntervalMS: durMS(hc.Interval), TimeoutMS: durMS(hc.Timeout), StartPeriodMS: durMS(hc.StartPeriod)}
	if hc.Retries != nil {
		spec.Healthcheck.Retries = int(*hc.Retries)
	}
	return true
}

// checkMode refuses an unknown mode or negative replicas, and warns of a
// global Service with named volumes.
func checkMode(svc Service) ([]string, error) {
	switch svc.Mode {
	case ModeReplicated, ModeGlobal:
	default:
		return nil, fmt.Errorf("mode: %q is not replicated or global", svc.Mode)
	}
	if svc.Replicas < 0 {
		return nil, fmt.Errorf("replicas: %d is negative", svc.Replicas)
	}
	if svc.Mode == ModeGlobal && len(svc.Provisioned) > 0 {
		return nil, fmt.Errorf("mode: global runs on every Machine, and Provisioned Volume %s has one Writer: use replicated", strings.Join(svc.Provisioned, ", "))
	}
	if svc.Mode == ModeGlobal && len(svc.Volumes) > 0 {
		return []string{fmt.Sprintf("service %q: global with named volumes: each Machine keeps its own copy", svc.Name)}, nil
	}
	return nil, nil
}

// checkJob refuses what a scheduled job cannot have: its runs are
// never ready, never routed to and bind no host port (docs/jobs.md).
func checkJob(svc Service) error {
	switch {
	case svc.Schedule == nil:
	case len(svc.Ingress) > 0:
		return fmt.Errorf("x-schedule: a scheduled job takes no ingress route (x-ports %s): runs are never routed to", svc.Ingress[0].Key())
	case len(svc.HostPorts) > 0:
		return fmt.Errorf("x-schedule: a scheduled job publishes no host port (%s): declare the ports on a Service", joinInts(svc.HostPorts))
	case len(svc.Hooks) > 0:
		return fmt.Errorf("x-schedule: a scheduled job has no x-pre_deploy hook: it never replaces Containers")
	case svc.Mode == ModeGlobal:
		return fmt.Errorf("x-schedule: a scheduled job runs once per tick, not on every Machine (mode global)")
	}
	return nil
}

// isCount reports whether s is a non-negative decimal number.
func isCount(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func durMS(d *types.Duration) int64 {
	if d == nil {
		return 0
	}
	return time.Duration(*d).Milliseconds()
}

func applyPorts(svc *Service, spec *rpc.ContainerSpec, ports []types.ServicePortConfig) error {
	for i, p := range ports {
		ps := rpc.PortSpec{ContainerPort: int(p.Target), Protocol: p.Protocol}
		if ps.Protocol == "" {
			ps.Protocol = "tcp"
		}
		if p.Published != "" {
			var hp int
			if _, err := fmt.Sscanf(p.Published, "%d", &hp); err != nil || fmt.Sprint(hp) != p.Published {
				return fmt.Errorf("ports[%d].published: %q is not one port (ranges are not supported)", i, p.Published)
			}
			ps.HostPort = hp
			svc.HostPorts = append(svc.HostPorts, hp)
		}
		spec.Ports = append(spec.Ports, ps)
	}
	return nil
}

func applyVolumes(ns string, svc *Service, spec *rpc.ContainerSpec, vols []types.ServiceVolumeConfig, pvs declaredVolumes) error {
	for i, v := range vols {
		m := rpc.MountSpec{Type: v.Type, Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly}
		switch v.Type {
		case types.VolumeTypeVolume:
			if v.Source == "" {
				// Anonymous: Machine-local, removed with the Container.
				break
			}
			if pv, ok := pvs[v.Source]; ok {
				// A Provisioned Volume is a directory on its Writer's
				// Machine: the Container bind-mounts it.
				m.Type, m.Source = types.VolumeTypeBind, path.Join(volume.MountRoot, pv.Name)
				if err := addProvisioned(svc, i, m.Source); err != nil {
					return err
				}
				break
			}
			m.Source = ns + "-" + v.Source
			svc.Volumes = append(svc.Volumes, m.Source)
		case types.VolumeTypeBind:
			if isLocalPath(v.Source) {
				continue // shipped from the operator's computer (shipper)
			}
			if err := addProvisioned(svc, i, v.Source); err != nil {
				return err
			}
		case types.VolumeTypeTmpfs:
		default:
			return fmt.Errorf("volumes[%d].type: %q is not volume, bind or tmpfs", i, v.Type)
		}
		spec.Mounts = append(spec.Mounts, m)
	}
	return nil
}

// addProvisioned records the Provisioned Volume a bind mount's source
// lies in, for volume locality.
func addProvisioned(svc *Service, i int, src string) error {
	name, ok := volume.MountedVolume(src)
	switch {
	case !ok:
		return nil
	case name == "":
		return fmt.Errorf("volumes[%d].source: %s holds every Provisioned Volume of a Machine: mount one volume's directory (%s/NAME)", i, src, volume.MountRoot)
	case !slices.Contains(svc.Provisioned, name):
		svc.Provisioned = append(svc.Provisioned, name)
	}
	return nil
}

// localVolumes are every volume that pins svc to a Machine: named Docker
// volumes and Provisioned Volumes.
func (svc Service) localVolumes() []string {
	return append(slices.Clone(svc.Volumes), svc.Provisioned...)
}

// dependencyOrder sorts services so each comes after what it depends on.
func dependencyOrder(svcs []Service) ([]Service, error) {
	byName := map[string]Service{}
	var names []string
	for _, s := range svcs {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	sort.Strings(names)
	var out []Service
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(n, from string) error
	visit = func(n, from string) error {
		s, ok := byName[n]
		if !ok {
			return fmt.Errorf("service %q: depends_on: %q is not declared", from, n)
		}
		switch state[n] {
		case 1:
			return fmt.Errorf("service %q: depends_on: cycle through %q", from, n)
		case 2:
			return nil
		}
		state[n] = 1
		for _, d := range s.DependsOn {
			if err := visit(d, n); err != nil {
				return err
			}
		}
		state[n] = 2
		out = append(out, s)
		return nil
	}
	for _, n := range names {
		if err := visit(n, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// buildOf resolves a service's build: section against the compose file's
// directory. The image is named after the service's image: (without its
// tag), else <namespace>-<service>.
func buildOf(dir, ns string, s types.ServiceConfig, secrets types.Secrets) (*Build, error) {
	b := s.Build
	if b.DockerfileInline != "" {
		return nil, errors.New("build.dockerfile_inline: not supported; put the Dockerfile in the context")
	}
	if strings.Contains(b.Context, "://") || strings.HasPrefix(b.Context, "git@") {
		return nil, fmt.Errorf("build.context: %q: only a local directory is supported", b.Context)
	}
	ctx := b.Context
	if ctx == "" {
		ctx = "."
	}
	if !filepath.IsAbs(ctx) {
		abs, err := filepath.Abs(filepath.Join(dir, ctx))
		if err != nil {
			return nil, fmt.Errorf("build.context: %w", err)
		}
		ctx = abs
	}
	repo := ns + "-" + s.Name
	if s.Image != "" {
		ref, err := reference.ParseNormalizedNamed(s.Image)
		if err != nil {
			return nil, fmt.Errorf("image: %q: %w", s.Image, err)
		}
		repo = reference.FamiliarName(ref)
	}
	out := &Build{Repo: repo, Context: ctx, Dockerfile: b.Dockerfile, Target: b.Target}
	for k, v := range b.Args {
		if v == nil {
			continue // an argument without a value: left to the Dockerfile's default
		}
		if out.Args == nil {
			out.Args = map[string]string{}
		}
		out.Args[k] = *v
	}
	if err := buildInputs(out, dir, *b, secrets); err != nil {
		return nil, err
	}
	return out, nil
}

// refusePortRanges refuses a port range in a Service's short-syntax ports
// before the compose loader expands it into one entry per port: ranges
// are not supported, and "1-65535:1-65535" alone took the loader seconds
// of CPU and was then accepted as 65,535 ports. A file that does not
// parse is left for the loader to report.
func refusePortRanges(compose []byte) error {
	var doc struct {
		Services map[string]struct {
			Ports []any `yaml:"ports"`
		} `yaml:"services"`
	}
	if yaml.Unmarshal(compose, &doc) != nil {
		return nil
	}
	names := make([]string, 0, len(doc.Services))
	for n := range doc.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for i, p := range doc.Services[n].Ports {
			if s, ok := p.(string); ok && strings.Contains(s, "-") {
				return fmt.Errorf("service %q: ports[%d]: %q: port ranges are not supported; list each port", n, i, s)
			}
		}
	}
	return nil
}
