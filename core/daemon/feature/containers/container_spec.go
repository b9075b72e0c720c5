package containers

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	sdkstore "github.com/ployz/ployz/sdk/store"
	"github.com/ployz/ployz/sdk/volume"
)

// Readiness modes of a Service Container (rpc.ContainerSpec.Readiness).
const (
	readinessHealthcheck = "healthcheck"
	readinessNotify      = "notify"
	readinessNone        = "none"
)

// validateNetworks refuses a network the namespace may not be on and an
// alias on a network the Container is not on, or not one DNS label.
func validateNetworks(s rpc.ContainerSpec) error {
	for i, n := range s.Networks {
		if !sdkstore.NetworkAllowed(s.Namespace, n) {
			return rpc.InvalidField(fmt.Sprintf("spec.networks[%d]", i), "%q is not a network of namespace %s (%s, %s/<name> or %s<name>)", n, s.Namespace, s.Namespace, s.Namespace, rpc.ExternalNetworkPrefix)
		}
	}
	on := sdkstore.ContainerBody{Namespace: s.Namespace, Networks: s.Networks}.IsolationNetworks()
	for n, as := range s.Aliases {
		if !slices.Contains(on, n) {
			return rpc.InvalidField(fmt.Sprintf("spec.aliases[%q]", n), "the Container is not on network %q (it is on %s)", n, strings.Join(on, ", "))
		}
		for i, a := range as {
			if !sdkstore.ValidAlias(a) {
				return rpc.InvalidField(fmt.Sprintf("spec.aliases[%q][%d]", n, i), "%q is not one lowercase DNS label (letters, digits and -, at most 63)", a)
			}
		}
	}
	return nil
}

// redacted replaces environment values in the ployz.spec label.
const redacted = "<redacted>"

var containerNameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// validateSpec refuses malformed fields of a create request, naming the
// field, and returns the spec with defaults resolved (readiness, kind,
// restart). It checks the request alone; admission checks local facts.
func validateSpec(req rpc.CreateContainerRequest) (rpc.ContainerSpec, error) {
	s := req.Spec
	if !containerNameRE.MatchString(req.Name) {
		return s, rpc.InvalidField("name", "%q is not a Docker container name ([a-zA-Z0-9][a-zA-Z0-9_.-]*)", req.Name)
	}
	for f, v := range map[string]string{"spec.namespace": s.Namespace, "spec.service": s.Service, "spec.image": s.Image} {
		if strings.TrimSpace(v) == "" {
			return s, rpc.InvalidField(f, "is empty")
		}
	}
	if err := validateNetworks(s); err != nil {
		return s, err
	}
	switch s.Kind {
	case "":
		s.Kind = rpc.KindService
	case rpc.KindService, rpc.KindHook, rpc.KindRun:
	default:
		return s, rpc.InvalidField("spec.kind", "%q is not service, hook or run", s.Kind)
	}
	switch s.Readiness {
	case "":
		s.Readiness = readinessNone
		if s.Healthcheck != nil && s.Kind != rpc.KindRun {
			s.Readiness = readinessHealthcheck
		}
	case readinessHealthcheck, readinessNotify, readinessNone:
	default:
		return s, rpc.InvalidField("spec.readiness", "%q is not healthcheck, notify or none", s.Readiness)
	}
	if s.Restart == "" {
		s.Restart = string(container.RestartPolicyUnlessStopped)
		if s.Kind != rpc.KindService {
			s.Restart = string(container.RestartPolicyDisabled)
		}
	}
	if _, err := restartPolicy(s.Restart); err != nil {
		return s, rpc.InvalidField("spec.restart", "%v", err)
	}
	if err := validateOneOff(s); err != nil {
		return s, err
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return s, rpc.InvalidField("spec.env", "%q is not an environment variable name", k)
		}
		if k == "NOTIFY_SOCKET" && s.Readiness == readinessNotify {
			return s, rpc.InvalidField("spec.env", "NOTIFY_SOCKET is set by the daemon for readiness notify")
		}
	}
	for k := range s.Labels {
		if k == "" || strings.HasPrefix(k, "ployz.") {
			return s, rpc.InvalidField("spec.labels", "%q: label keys must be non-empty and outside ployz.*", k)
		}
	}
	if s.CPUs < 0 {
		return s, rpc.InvalidField("spec.cpus", "%v is negative", s.CPUs)
	}
	if s.MemoryBytes < 0 {
		return s, rpc.InvalidField("spec.memory_bytes", "%d is negative", s.MemoryBytes)
	}
	if err := validatePorts(s.Ports, s.Kind); err != nil {
		return s, err
	}
	if err := validateMounts(s.Mounts); err != nil {
		return s, err
	}
	if err := validateHealthcheck(s.Healthcheck); err != nil {
		return s, err
	}
	if err := validateFiles(s.Files, req.Files); err != nil {
		return s, err
	}
	if err := validateHost(s.Host); err != nil {
		return s, err
	}
	for i, c := range s.Constraints {
		if c.Label == "" {
			return s, rpc.InvalidField(fmt.Sprintf("spec.constraints[%d].label", i), "is empty")
		}
		if c.Op != "==" && c.Op != "!=" {
			return s, rpc.InvalidField(fmt.Sprintf("spec.constraints[%d].op", i), "%q is not == or !=", c.Op)
		}
	}
	for i, r := range s.Roles {
		if err := rpc.ValidRole(r); err != nil {
			return s, rpc.InvalidField(fmt.Sprintf("spec.roles[%d]", i), "%v", err)
		}
	}
	return s, nil
}

// validateOneOff refuses what a one-off run cannot have: it is never
// restarted, never waited ready, serves no ingress and publishes no host
// port (the Service's own Containers may hold it on this Machine).
func validateOneOff(s rpc.ContainerSpec) error {
	if s.Kind != rpc.KindRun {
		return nil
	}
	switch {
	case s.Restart != string(container.RestartPolicyDisabled):
		return rpc.InvalidField("spec.restart", "%q: a one-off run is not restarted (no)", s.Restart)
	case s.Readiness != readinessNone:
		return rpc.InvalidField("spec.readiness", "%q: a one-off run is never waited ready (none)", s.Readiness)
	case len(s.Ingress) > 0:
		return rpc.InvalidField("spec.ingress", "a one-off run serves no ingress route")
	}
	for i, p := range s.Ports {
		if p.HostPort != 0 {
			return rpc.InvalidField(fmt.Sprintf("spec.ports[%d].host_port", i), "%d: a one-off run publishes no host port", p.HostPort)
		}
	}
	return nil
}

func validatePorts(ports []rpc.PortSpec, kind string) error {
	activated := -1
	for i, p := range ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if p.ContainerPort < 1 || p.ContainerPort > 65535 {
			return rpc.InvalidField(f+".container_port", "%d is not a port (1-65535)", p.ContainerPort)
		}
		if p.HostPort < 0 || p.HostPort > 65535 {
			return rpc.InvalidField(f+".host_port", "%d is not a port (0-65535)", p.HostPort)
		}
		if p.Protocol != "" && p.Protocol != "tcp" && p.Protocol != "udp" {
			return rpc.InvalidField(f+".protocol", "%q is not tcp or udp", p.Protocol)
		}
		if !p.SocketActivation {
			continue
		}
		switch {
		case kind != rpc.KindService:
			return rpc.InvalidField(f+".socket_activation", "only a service Container is socket activated, not a %s", kind)
		case p.HostPort == 0 || p.Protocol == "udp":
			return rpc.InvalidField(f+".socket_activation", "needs a TCP host_port")
		case activated >= 0:
			return rpc.InvalidField(f+".socket_activation", "spec.ports[%d] is already socket activated: one socket per Container (LISTEN_FDS=1)", activated)
		}
		activated = i
	}
	return nil
}

func validateMounts(mounts []rpc.MountSpec) error {
	for i, m := range mounts {
		f := fmt.Sprintf("spec.mounts[%d]", i)
		if !path.IsAbs(m.Target) {
			return rpc.InvalidField(f+".target", "%q is not an absolute path", m.Target)
		}
		switch m.Type {
		case "volume":
			// No source: an anonymous volume, Machine-local and removed
			// with the Container (remove_container removes its volumes).
			if m.Source != "" && !containerNameRE.MatchString(m.Source) {
				return rpc.InvalidField(f+".source", "%q is not a volume name", m.Source)
			}
		case "bind":
			if !path.IsAbs(m.Source) {
				return rpc.InvalidField(f+".source", "%q is not an absolute host path", m.Source)
			}
		case "tmpfs":
		default:
			return rpc.InvalidField(f+".type", "%q is not volume, bind or tmpfs", m.Type)
		}
	}
	return nil
}

func validateHealthcheck(h *rpc.Healthcheck) error {
	if h == nil {
		return nil
	}
	if len(h.Test) == 0 || (h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL" && h.Test[0] != "NONE") {
		return rpc.InvalidField("spec.healthcheck.test", "must start with CMD, CMD-SHELL or NONE")
	}
	if h.Test[0] != "NONE" && len(h.Test) < 2 {
		return rpc.InvalidField("spec.healthcheck.test", "%s needs a command", h.Test[0])
	}
	for f, v := range map[string]int64{"interval_ms": h.IntervalMS, "timeout_ms": h.TimeoutMS, "start_period_ms": h.StartPeriodMS, "retries": int64(h.Retries)} {
		if v < 0 {
			return rpc.InvalidField("spec.healthcheck."+f, "%d is negative", v)
		}
	}
	return nil
}

func restartPolicy(s string) (container.RestartPolicy, error) {
	name, count, hasCount := strings.Cut(s, ":")
	p := container.RestartPolicy{Name: container.RestartPolicyMode(name)}
	switch p.Name {
	case container.RestartPolicyDisabled, container.RestartPolicyAlways, container.RestartPolicyUnlessStopped:
		if hasCount {
			return p, fmt.Errorf("%q: only on-failure takes a retry count", s)
		}
	case container.RestartPolicyOnFailure:
		if hasCount {
			n, err := strconv.Atoi(count)
			if err != nil || n < 0 {
				return p, fmt.Errorf("%q: retry count is not a non-negative integer", s)
			}
			p.MaximumRetryCount = n
		}
	default:
		return p, fmt.Errorf("%q is not no, always, unless-stopped or on-failure[:N]", s)
	}
	return p, nil
}

// specLabel is the ployz.spec label: the spec as JSON, env values redacted.
func specLabel(s rpc.ContainerSpec) string {
	if len(s.Env) > 0 {
		env := make(map[string]string, len(s.Env))
		for k := range s.Env {
			env[k] = redacted
		}
		s.Env = env
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// labelSpec decodes the ployz.spec label (env values redacted).
func labelSpec(labels map[string]string) (rpc.ContainerSpec, error) {
	var spec rpc.ContainerSpec
	err := json.Unmarshal([]byte(labels[rpc.LabelSpec]), &spec)
	return spec, err
}

// exportedSpec is c's spec from its ployz.spec label, each environment
// value the label redacts taken from Docker's config.
func exportedSpec(c container.InspectResponse) (rpc.ContainerSpec, error) {
	if c.Config == nil || c.Config.Labels[rpc.LabelSpec] == "" {
		return rpc.ContainerSpec{}, rpc.Errorf(rpc.CodeFailedPrecond, "container %s has no %s label: ployz did not create it", strings.TrimPrefix(c.Name, "/"), rpc.LabelSpec).
			With("field", "id")
	}
	spec, err := labelSpec(c.Config.Labels)
	if err != nil {
		return rpc.ContainerSpec{}, rpc.Errorf(rpc.CodeFailedPrecond, "container %s: label %s: %v", strings.TrimPrefix(c.Name, "/"), rpc.LabelSpec, err)
	}
	for _, kv := range c.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := spec.Env[k]; ok {
			spec.Env[k] = v
		}
	}
	return spec, nil
}

// dockerCreate is everything ContainerCreate takes for one Container.
type dockerCreate struct {
	config  *container.Config
	host    *container.HostConfig
	network *network.NetworkingConfig
}

// buildCreate turns a validated spec into Docker's create request on
// networkName, with dns as the resolver when valid. notify, when set, is
// the host directory holding the readiness socket.
func buildCreate(s rpc.ContainerSpec, networkName, dns, notifyDir string) dockerCreate {
	labels := maps.Clone(s.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, map[string]string{
		rpc.LabelNamespace: s.Namespace, rpc.LabelService: s.Service, rpc.LabelServiceID: s.ServiceID,
		rpc.LabelDeployment: s.DeploymentID, rpc.LabelSpecHash: s.SpecHash, rpc.LabelReadiness: s.Readiness,
		rpc.LabelKind: s.Kind, rpc.LabelSpec: specLabel(s),
	})
	cfg := &container.Config{Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Command, WorkingDir: s.WorkingDir,
		User: s.User, Labels: labels, ExposedPorts: nat.PortSet{}}
	for k, v := range s.Env {
		cfg.Env = append(cfg.Env, k+"="+v)
	}
	policy, _ := restartPolicy(s.Restart)
	host := &container.HostConfig{NetworkMode: container.NetworkMode(networkName), RestartPolicy: policy,
		PortBindings: nat.PortMap{}, Resources: container.Resources{NanoCPUs: int64(s.CPUs * 1e9), Memory: s.MemoryBytes},
		// Docker's local driver: compact files the Log Store plugin reads
		// and keeps after the Container is removed (docs/observe.md).
		LogConfig: container.LogConfig{Type: "local"}}
	if dns != "" {
		// Internal DNS on the Machine gateway; the Container's own
		// namespace is its search domain, so a plain <service> resolves.
		host.DNS = []string{dns}
		host.DNSSearch = []string{s.Namespace + ".internal"}
	}
	for _, p := range s.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		port := nat.Port(fmt.Sprintf("%d/%s", p.ContainerPort, proto))
		cfg.ExposedPorts[port] = struct{}{}
		if p.HostPort > 0 {
			host.PortBindings[port] = append(host.PortBindings[port], nat.PortBinding{HostPort: strconv.Itoa(p.HostPort)})
		}
	}
	for _, m := range s.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.Type(m.Type), Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	if notifyDir != "" {
		// A legacy bind, which Docker creates when missing: after a reboot
		// (the directory lives on /run) the Container still starts, and
		// the daemon binds a fresh socket there when it comes up.
		host.Binds = append(host.Binds, notifyDir+":"+notifyMountTarget)
		cfg.Env = append(cfg.Env, "NOTIFY_SOCKET="+notifyMountTarget+"/"+notifySocketName)
	}
	applyHost(s.Host, cfg, host)
	if h := s.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: ms(h.IntervalMS), Timeout: ms(h.TimeoutMS),
			StartPeriod: ms(h.StartPeriodMS), Retries: h.Retries}
	}
	return dockerCreate{config: cfg, host: host,
		network: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{networkName: {}}}}
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// admit checks a validated spec against this Machine's own fresh facts:
// phase and placement constraints (docs/architecture.md, Machine-local admission).
func admit(s rpc.ContainerSpec, f Facts) error {
	if f.Phase != machine.Participating {
		return rpc.Errorf(rpc.CodeFailedPrecond, "machine %s is %s: only a participating Machine admits new Containers", f.Name, f.Phase).
			With("phase", string(f.Phase))
	}
	if err := rpc.AdmitLabels(f.Name, f.Labels, s); err != nil {
		return err
	}
	return admitVolumes(s, f)
}

// admitVolumes refuses a Container that bind-mounts a Provisioned Volume
// unless this Machine's copy of it is the Writer (a Mirror, a copy with
// no role, or a volume not here is refused), so one Writer at a time
// takes writes (design: Machine-local admission).
func admitVolumes(s rpc.ContainerSpec, f Facts) error {
	for i, m := range s.Mounts {
		if m.Type != "bind" {
			continue
		}
		name, ok := volume.MountedVolume(m.Source)
		if !ok {
			continue
		}
		field := fmt.Sprintf("spec.mounts[%d].source", i)
		if name == "" {
			return rpc.Errorf(rpc.CodeFailedPrecond, "%s: %s holds every Provisioned Volume of machine %s: mount one volume's directory", field, m.Source, f.Name).
				With("field", field)
		}
		c := f.Copies[name]
		if c.RoleOf() != volumecopy.Writer {
			return rpc.Errorf(rpc.CodeFailedPrecond, "%s: machine %s's copy of volume %q is %s, not the Writer: only the Writer's Machine admits a Container mounting it (`ployz volume ls`)",
				field, f.Name, name, c.RoleOf()).With("field", field).With("volume", name).With("copy", c.View())
		}
	}
	return nil
}
