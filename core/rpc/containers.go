package rpc

import (
	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// Service Container commands. The CLI plans a Deploy and sends these to
// each target Machine in turn; the daemon admits every creation against
// its own fresh facts (docs/architecture.md bet 10) and otherwise only does what it
// is told. Payloads follow the Stable promise: additive, tolerant readers.
const (
	// CmdListContainers is a live observation of this Machine's Service
	// Containers straight from Docker (not the replicated store), for a
	// Deploy Snapshot.
	CmdListContainers = "list_containers"
	CapListContainers = "ployz.container.list.v1"

	// CmdCreateContainer admits and creates (not starts) one Container.
	CmdCreateContainer = "create_container"
	CapCreateContainer = "ployz.container.create.v1"

	CmdStartContainer = "start_container"
	CapStartContainer = "ployz.container.start.v1"

	// CmdWaitReady waits (bounded by the request) until a started
	// Container is ready, crashed, restarted or unhealthy, and says which.
	CmdWaitReady = "wait_ready"
	CapWaitReady = "ployz.container.wait_ready.v1"

	CmdStopContainer = "stop_container"
	CapStopContainer = "ployz.container.stop.v1"

	CmdRemoveContainer = "remove_container"
	CapRemoveContainer = "ployz.container.remove.v1"

	// CmdExportContainer answers a Service Container's spec as it was
	// created, environment values included (list_containers redacts
	// them), so `ployz volume move` can create the same Container on
	// another Machine. With with_files, shipped files' content comes
	// too, by digest, as create_container takes it (an older Machine
	// answers without it).
	CmdExportContainer = "export_container"
	CapExportContainer = "ployz.container.export.v1"

	// CmdListImages lists the images this Machine's Docker holds.
	CmdListImages = "list_images"
	CapListImages = "ployz.image.list.v1"
)

// Labels every Service Container carries; they make a Container's identity
// and let any observer group Containers into Services without a registry.
const (
	LabelNamespace  = "ployz.namespace"  // <project>-<environment>
	LabelService    = "ployz.service"    // Service name within the namespace
	LabelServiceID  = "ployz.service_id" // opaque id kept across updates
	LabelDeployment = "ployz.deployment" // deployment id that created it
	LabelSpecHash   = "ployz.spec_hash"  // hash of the resolved spec: up-to-date detection
	LabelReadiness  = "ployz.readiness"  // healthcheck, notify or none
	LabelKind       = "ployz.kind"       // service, hook or run (KindService...)
	LabelSpec       = "ployz.spec"       // the resolved spec as JSON (secrets redacted)
)

// IngressRoute is one ingress route: HTTP requests for Hostname (Protocol
// "" or "http"), or TCP connections to Port on every ingress Machine
// (Protocol "tcp"), reach the Container's ContainerPort.
//
// An HTTP route may also name a Path prefix (only requests under it; ""
// is the whole hostname), strip that prefix before the request reaches the
// Container (StripPrefix), and opt out of the redirect to HTTPS that
// every route gets once a certificate for its hostname is loaded
// (RedirectHTTPS false; nil is the default). Hostname may be a wildcard
// (*.example.com). Matching is package sdk/ingress's (paths.go). It may
// also bound request bodies (MaxBodyBytes: larger ones are answered 413),
// bound the wait for the Container's response headers
// (ResponseTimeoutMS: 504 after it), rewrite headers and require basic
// authentication (package sdk/ingress/routeopt). The fields are left out
// when unset, so a route without them hashes as before they existed.
type IngressRoute struct {
	Hostname      string `json:"hostname,omitempty"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol,omitempty"`
	Port          int    `json:"port,omitempty"`
	Path          string `json:"path,omitempty"`
	routeopt.Options
}

// ContainerSpec is the Resolved Service Spec of one Container: everything
// the daemon needs to create it, stamped on it at creation.
type ContainerSpec struct {
	Namespace    string            `json:"namespace"`
	Service      string            `json:"service"`
	ServiceID    string            `json:"service_id"`
	DeploymentID string            `json:"deployment_id"`
	SpecHash     string            `json:"spec_hash"`
	Kind         string            `json:"kind,omitempty"` // service (default), hook or run
	Image        string            `json:"image"`
	Entrypoint   []string          `json:"entrypoint,omitempty"`
	Command      []string          `json:"command,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	WorkingDir   string            `json:"working_dir,omitempty"`
	User         string            `json:"user,omitempty"`
	Ports        []PortSpec        `json:"ports,omitempty"`
	Mounts       []MountSpec       `json:"mounts,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Healthcheck  *Healthcheck      `json:"healthcheck,omitempty"`
	// Readiness is how the daemon decides the Container is ready:
	// "healthcheck" (Docker health), "notify" (one READY=1 on the
	// NOTIFY_SOCKET the daemon mounts) or "none" (running is ready).
	Readiness string `json:"readiness,omitempty"`
	// Restart is Docker's restart policy (default unless-stopped).
	Restart string `json:"restart,omitempty"`
	// Ingress are the Service's hostname routes (x-ports hostname), the
	// same on every Container of the Service; they are part of SpecHash,
	// so a route change replaces the Containers.
	Ingress     []IngressRoute `json:"ingress,omitempty"`
	CPUs        float64        `json:"cpus,omitempty"`
	MemoryBytes int64          `json:"memory_bytes,omitempty"`
	// Constraints are re-checked by the target daemon against its own
	// labels before it creates anything (Machine-local admission).
	Constraints []Constraint `json:"constraints,omitempty"`
	// Roles are the Machine roles the Service needs (x-placement roles):
	// the target daemon admits it only when it carries each
	// (MachineLabelRolePrefix).
	Roles []string `json:"roles,omitempty"`
	// Files come from the operator's computer (compose configs, secrets
	// and relative bind mounts) and are mounted read-only. The spec
	// names each by digest, so a changed file changes SpecHash; the
	// content travels in CreateContainerRequest.Files.
	Files []FileSpec `json:"files,omitempty"`
	// Host holds the compose keys that shape the Container's Docker
	// host config (cap_add, devices, sysctls, ulimits, ...). Nil: none,
	// so a spec that declares none hashes as it did before it existed.
	Host *HostSpec `json:"host,omitempty"`
	// Networks are the isolation networks the Container is on, sorted:
	// its namespace (the default network), "<namespace>/<name>" for a
	// compose network of its own, "external:<name>" for one shared
	// between namespaces. Nil: the default network only, as every
	// release before compose networks wrote (and hashed).
	Networks []string `json:"networks,omitempty"`
	// Aliases are the compose network aliases, by isolation network
	// (each a network the Container is on, each alias one lowercase DNS
	// label, sorted): Internal DNS answers them only to Containers on
	// that network. Nil: none, so the spec hashes as before aliases.
	Aliases map[string][]string `json:"aliases,omitempty"`
}

// ExternalNetworkPrefix starts the isolation network of a compose
// network declared external: true (store.NetworkAllowed says which
// networks a namespace may be on).
const ExternalNetworkPrefix = store.ExternalNetworkPrefix

// CapContainerHost is advertised by a Machine whose create_container
// applies ContainerSpec.Host. A Machine without it would ignore the
// field, so the planner never sends it a spec that carries one.
const CapContainerHost = "ployz.container.host.v1"

// CapContainerRoutes is advertised by a Machine whose Container rows
// carry an ingress route's path, strip_prefix and redirect_https. An older
// one would drop them, publishing the route for its whole hostname, so the
// planner places a Service with such a route only where this is served.
const CapContainerRoutes = "ployz.container.routes.v1"

// CapContainerRedirects is advertised by a Machine whose Container rows
// carry an ingress route's redirect_to (x-ports redirect_from). An older
// one would drop it, so the redirecting hostname would reach the
// Container instead of answering 308; the planner places a Service with
// such a route only where this is served.
const CapContainerRedirects = "ployz.container.redirects.v1"

// CapContainerUpstreamProtocol is advertised by a Machine whose Container
// rows carry an ingress route's upstream_protocol. An older one would drop
// it, and the Ingress Proxies would reach an h2c-only Container over
// HTTP/1.1; the planner places such a Service only where this is served.
const CapContainerUpstreamProtocol = "ployz.container.upstream-protocol.v1"

// CapContainerTLSOnDemand is advertised by a Machine whose Container rows
// carry an ingress route's tls (on_demand). An older one would drop it,
// and no name under the wildcard would get a certificate.
const CapContainerTLSOnDemand = "ployz.container.tls-on-demand.v1"

// CapContainerAliases is advertised by a Machine whose Container rows
// carry spec.aliases (Internal DNS answers them from the rows). An older
// one would drop them, so the alias would never name its Containers; the
// planner places a Service with aliases only where this is served.
const CapContainerAliases = "ployz.container.aliases.v1"

// CapContainerSocketActivation is advertised by a Machine whose
// create_container honours PortSpec.SocketActivation. An older one would
// publish the port through Docker and run the image without the socket,
// so the planner places such a Service only where this is served.
const CapContainerSocketActivation = "ployz.container.socket-activation.v1"

// HostSpec is what a compose Service declares about its Container beyond
// image, command, environment, ports and mounts, as Docker Compose
// applies it to the create request. Every field is optional.
type HostSpec struct {
	CapAdd      []string          `json:"cap_add,omitempty"`
	CapDrop     []string          `json:"cap_drop,omitempty"`
	Privileged  bool              `json:"privileged,omitempty"`
	Init        bool              `json:"init,omitempty"`
	ReadOnly    bool              `json:"read_only,omitempty"`
	SecurityOpt []string          `json:"security_opt,omitempty"`
	Devices     []DeviceSpec      `json:"devices,omitempty"`
	GPUs        []DeviceRequest   `json:"device_requests,omitempty"`
	Tmpfs       map[string]string `json:"tmpfs,omitempty"` // path -> mount options ("" none)
	ShmBytes    int64             `json:"shm_size_bytes,omitempty"`
	Ulimits     map[string]Ulimit `json:"ulimits,omitempty"`
	Sysctls     map[string]string `json:"sysctls,omitempty"`
	// ExtraHosts are /etc/hosts entries, each "host:ip", sorted.
	ExtraHosts []string `json:"extra_hosts,omitempty"`
	StopSignal string   `json:"stop_signal,omitempty"`
	// StopTimeoutSeconds is stop_grace_period for Docker's own stops
	// (a Machine shutting down); nil leaves Docker's default.
	StopTimeoutSeconds *int `json:"stop_timeout_seconds,omitempty"`
	// MemoryReservationBytes is deploy.resources.reservations.memory
	// (or mem_reservation): Docker's soft limit.
	MemoryReservationBytes int64 `json:"memory_reservation_bytes,omitempty"`
	PidsLimit              int64 `json:"pids_limit,omitempty"`
	// LogOptions are logging.options for Docker's local log driver,
	// which Ployz always uses (the Log Store reads its files).
	LogOptions map[string]string `json:"log_options,omitempty"`
}

// DeviceSpec maps one host device into the Container (compose devices).
type DeviceSpec struct {
	Source      string `json:"source"`
	Target      string `json:"target,omitempty"`      // "" is Source
	Permissions string `json:"permissions,omitempty"` // "" is rwm
}

// DeviceRequest asks Docker for devices by driver and capability, e.g.
// GPUs (deploy.resources.reservations.devices, gpus).
type DeviceRequest struct {
	Driver       string            `json:"driver,omitempty"`
	Count        int               `json:"count,omitempty"` // -1: all
	DeviceIDs    []string          `json:"device_ids,omitempty"`
	Capabilities []string          `json:"capabilities,omitempty"`
	Options      map[string]string `json:"options,omitempty"`
}

// Ulimit is one resource limit; Soft and Hard are equal for a single value.
type Ulimit struct {
	Soft int64 `json:"soft"`
	Hard int64 `json:"hard"`
}

// FileSpec is one file or small directory shipped with a deploy.
type FileSpec struct {
	Target string `json:"target"`
	// Digest is "sha256:<hex>" of the content (a directory's content is
	// a tar archive of it).
	Digest string `json:"digest"`
	Kind   string `json:"kind"`           // file or dir
	Mode   uint32 `json:"mode,omitempty"` // a file's permission bits; 0 is 0444
	// Source names what the compose file declared: config:<name>,
	// secret:<name> or a relative path.
	Source string `json:"source,omitempty"`
}

// PortSpec publishes a container port.
type PortSpec struct {
	ContainerPort int    `json:"container_port"`
	HostPort      int    `json:"host_port,omitempty"` // 0: not published on the host
	Protocol      string `json:"protocol,omitempty"`  // tcp (default) or udp
	// SocketActivation (x-socket-activation, tcp host ports only): the
	// Machine listens on HostPort itself, keeps the socket across
	// replacements and passes it to each Container as fd 3 (systemd
	// socket activation); Docker does not publish the port.
	SocketActivation bool `json:"socket_activation,omitempty"`
}

// MountSpec is one volume, bind or tmpfs mount.
type MountSpec struct {
	Type     string `json:"type"`             // volume, bind or tmpfs
	Source   string `json:"source,omitempty"` // volume name or host path
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// Healthcheck is a Docker healthcheck.
type Healthcheck struct {
	Test          []string `json:"test"` // e.g. ["CMD", "/app", "healthcheck"]
	IntervalMS    int64    `json:"interval_ms,omitempty"`
	TimeoutMS     int64    `json:"timeout_ms,omitempty"`
	StartPeriodMS int64    `json:"start_period_ms,omitempty"`
	Retries       int      `json:"retries,omitempty"`
}

// MachineLabelDrained is the Machine label `ployz machine drain` sets: the
// Machine admits no new Container until it is removed (undrain).
const MachineLabelDrained = "ployz.drained"

// Constraint is one placement constraint on Machine labels:
// label <op> value, op "==" or "!=".
type Constraint struct {
	Label string `json:"label"`
	Op    string `json:"op"`
	Value string `json:"value"`
}

// CreateContainerRequest asks for one Container.
type CreateContainerRequest struct {
	Name string        `json:"name"` // Docker name, e.g. <namespace>-<service>-<4 hex>
	Spec ContainerSpec `json:"spec"`
	// Files holds the content of Spec.Files by digest. The Machine keeps
	// it in its own state directory only, never in replicated rows.
	Files map[string][]byte `json:"files,omitempty"`
}

// ContainerRef names one Container on the target Machine.
type ContainerRef struct {
	ID string `json:"id"`
}

// StopContainerRequest stops a Container.
type StopContainerRequest struct {
	ID                 string `json:"id"`
	GracePeriodSeconds int    `json:"grace_period_seconds,omitempty"`
}

// RemoveContainerRequest removes a Container.
type RemoveContainerRequest struct {
	ID    string `json:"id"`
	Force bool   `json:"force,omitempty"`
}

// ContainerRemoved is remove_container's answer: the removed
// Container's id.
type ContainerRemoved struct {
	Removed string `json:"removed"`
}

// WaitReadyRequest bounds a readiness wait.
type WaitReadyRequest struct {
	ID             string `json:"id"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// WaitReadyResult says how a readiness wait ended.
type WaitReadyResult struct {
	// Outcome is ready, exited, restarting, unhealthy or timeout.
	Outcome  string `json:"outcome"`
	ExitCode int    `json:"exit_code,omitempty"`
	// LogTail holds the last lines of output when the outcome is not ready.
	LogTail []string `json:"log_tail,omitempty"`
	Message string   `json:"message,omitempty"`
}

// ExportContainerRequest is export_container's request: a ContainerRef
// that may ask for the shipped files' content.
type ExportContainerRequest struct {
	ID        string `json:"id"`
	WithFiles bool   `json:"with_files,omitempty"`
}

// ContainerExport is export_container's answer.
type ContainerExport struct {
	ID   string        `json:"id"`
	Name string        `json:"name"`
	Spec ContainerSpec `json:"spec"`
	// Files is the content of Spec.Files by digest, when asked for and
	// this Machine still holds it (a file shipped before it kept a
	// directory's archive is left out).
	Files map[string][]byte `json:"files,omitempty"`
}

// ListContainersRequest filters a live listing.
type ListContainersRequest struct {
	Namespace string `json:"namespace,omitempty"` // empty: every Service Container
	// OneOffs lists the one-off run Containers (kind run) too; without
	// it they are left out, so a caller that predates them never counts
	// one as a replica.
	OneOffs bool `json:"one_offs,omitempty"`
}

// ContainerObservation is one Container as its Machine sees it now.
type ContainerObservation struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	MachineID  string `json:"machine_id"`
	Namespace  string `json:"namespace"`
	Service    string `json:"service"`
	ServiceID  string `json:"service_id,omitempty"`
	Deployment string `json:"deployment,omitempty"`
	SpecHash   string `json:"spec_hash,omitempty"`
	Image      string `json:"image"`
	ImageID    string `json:"image_id,omitempty"`
	State      string `json:"state"`            // created, running, restarting, exited, ...
	Health     string `json:"health,omitempty"` // healthy, unhealthy, starting, none
	ExitCode   int    `json:"exit_code,omitempty"`
	// RestartCount counts Docker's restarts of this Container (restart
	// policy); OOMKilled says its last run was killed by the OOM killer.
	RestartCount int  `json:"restart_count,omitempty"`
	OOMKilled    bool `json:"oom_killed,omitempty"`
	// StartedAt and FinishedAt are the last run's start and exit (RFC
	// 3339), empty when there was none.
	StartedAt  string            `json:"started_at,omitempty"`
	FinishedAt string            `json:"finished_at,omitempty"`
	Ready      bool              `json:"ready"`
	IP         string            `json:"ip,omitempty"`
	CreatedAt  int64             `json:"created_at"` // unix seconds
	Spec       *ContainerSpec    `json:"spec,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// ContainerList is list_containers' payload.
type ContainerList struct {
	MachineID  string                 `json:"machine_id"`
	Containers []ContainerObservation `json:"containers"`
	// Volumes are this Machine's Docker volume names, for volume locality.
	Volumes []string `json:"volumes"`
	// Labels are this Machine's placement labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Writers are the Provisioned Volumes whose copy here is the Writer,
	// sorted: a Service bind-mounting one is placed here (volume
	// locality). Absent from Machines before it.
	Writers []string `json:"writers,omitempty"`
}

// LogLine is one line of Container output as Docker's API gives it
// (wait_ready's log tail of a Container that did not become ready).
type LogLine struct {
	Time   int64  `json:"time_unix_nano"`
	Stream string `json:"stream"` // stdout or stderr
	Text   string `json:"text"`
}

// ImageList is list_images' payload.
type ImageList struct {
	Images []ImageInfo `json:"images"`
	// Platform is the os/architecture this Machine runs images for, such
	// as linux/amd64; empty from a Machine from before it was reported.
	Platform string `json:"platform,omitempty"`
}

// ImageInfo is one local image.
type ImageInfo struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags"`
	Size int64    `json:"size"`
	// Layers are the image's layer diff ids in order, only when the
	// request asked for them (ListImagesRequest.Layers).
	Layers []string `json:"layers,omitempty"`
}

// ListImagesRequest is list_images' optional payload.
type ListImagesRequest struct {
	// Layers asks for every image's layer diff ids, so an image push can
	// leave out the layers a Machine already holds.
	Layers bool `json:"layers,omitempty"`
}

// CmdImageLoad is a streaming command: the client sends an image archive
// (`docker save` format) as data frames, the Machine loads it into its
// Docker and answers one ImageLoadResult event.
const (
	CmdImageLoad = "image_load"
	CapImageLoad = "ployz.image.load.v1"
)

// ImageLoadResult is image_load's event.
type ImageLoadResult struct {
	Bytes  int64    `json:"bytes"`
	Loaded []string `json:"loaded"` // what Docker reported, e.g. "Loaded image: x:y"
}

// CmdExec is a streaming command: run a process inside a Container.
// Client data frames are its stdin (EOF closes it); server data frames are
// its output, each followed by no event for stdout or an ExecOutput event
// naming stderr; the last event before Done is an ExecExit.
const (
	CmdExec = "exec"
	CapExec = "ployz.container.exec.v1"
)

// ExecRequest starts a process in a Container.
type ExecRequest struct {
	ID    string   `json:"id"`
	Cmd   []string `json:"cmd"`
	TTY   bool     `json:"tty,omitempty"`
	Stdin bool     `json:"stdin,omitempty"`
	Env   []string `json:"env,omitempty"`
}

// ExecOutput marks which stream a data frame belongs to.
type ExecOutput struct {
	Stream string `json:"stream"` // stdout or stderr
}

// ExecExit is the process's exit code.
type ExecExit struct {
	ExitCode int `json:"exit_code"`
}
