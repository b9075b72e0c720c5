package dashboard

import (
	"context"
	"io"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/observe"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/views"
	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/core/volumes"
)

// Source is what the dashboard reads and does; client/dashsource
// implements it over an operator library Session, with the calls the
// CLI's own commands make.
type Source interface {
	Cluster(ctx context.Context) (Cluster, error)
	Services(ctx context.Context) (Services, error)
	Service(ctx context.Context, namespace, service string) (Service, error)
	Deploys(ctx context.Context) (Deploys, error)
	// Volumes asks every Machine for its Provisioned Volumes, as `ployz
	// volume ls` does, and which Containers mount them.
	Volumes(ctx context.Context) (Volumes, error)
	// Jobs lists the scheduled jobs with their newest runs, as `ployz
	// jobs ls` does.
	Jobs(ctx context.Context) (Jobs, error)
	Metrics(ctx context.Context, q MetricsQuery) ([]MachineMetrics, error)
	// Logs follows a Service's output on every Machine until ctx ends,
	// calling emit for each line, for each Machine that fails and, as a
	// broken stream is reopened with backoff, when it is down and up.
	Logs(ctx context.Context, namespace, service string, emit func(LogLine)) error
	// Scale and Restart deploy the latest Saved State changed (as `ployz
	// scale` and `ployz service restart` do), writing progress to out.
	Scale(ctx context.Context, namespace, service string, replicas int, out io.Writer) error
	Restart(ctx context.Context, namespace, service string, out io.Writer) error
	// StartStop starts or stops (verb) the Service's existing Containers
	// without a new revision, as `ployz start|stop` do.
	StartStop(ctx context.Context, namespace, service, verb string, out io.Writer) error
}

// Cluster is the Cluster page: the Machines one Entry Machine observes.
type Cluster struct {
	Observer   string    `json:"observer"`
	ObservedAt time.Time `json:"observed_at"`
	Machines   []Machine `json:"machines"`
}

// Machine is one Machine's row, its record as the observer has it plus
// what the Machine says of its own plugins.
type Machine struct {
	rpc.MachineView
	// DrainedSince is set while the Machine is drained.
	DrainedSince string           `json:"drained_since,omitempty"`
	Plugins      []rpc.PluginView `json:"plugins,omitempty"`
	// PluginsError says why the Machine's own inspection is missing.
	PluginsError string `json:"plugins_error,omitempty"`
}

// Services is the Services page.
type Services struct {
	Services   []ServiceRow        `json:"services"`
	Unobserved []deploy.Unobserved `json:"unobserved,omitempty"`
}

// ServiceRow is `ployz ls`'s row with execution and ingress status side
// by side (they are separate facts).
type ServiceRow struct {
	views.ServiceRow
	Execution string `json:"execution"`
	Ingress   string `json:"ingress"`
	// Certificates are the HTTPS hostnames' certificates, one per
	// hostname route, as the Machines' Ingress Proxies have them.
	Certificates []CertSummary `json:"certificates,omitempty"`
	// Scalable is false when no Saved State declares the Service (the
	// actions deploy a Saved State).
	Scalable bool `json:"scalable"`
}

// Service is one Service's page: `ployz service inspect` in a browser.
type Service struct {
	Namespace     string `json:"namespace"`
	Service       string `json:"service"`
	Desired       int    `json:"desired"`
	Running       int    `json:"running"`
	Ready         int    `json:"ready"`
	Execution     string `json:"execution"`
	Ingress       string `json:"ingress"`
	IngressReason string `json:"ingress_reason,omitempty"`
	// Routes are each Machine's state of the Service's ingress routes.
	Routes     []RouteView         `json:"routes,omitempty"`
	Serving    *rpc.ServiceServing `json:"serving,omitempty"`
	Containers []Container         `json:"containers"`
	Unobserved []deploy.Unobserved `json:"unobserved,omitempty"`
	// Deploying is a Deploy of the Service's namespace running from this
	// computer now (its record; see Deploys).
	Deploying *deploy.Record `json:"deploying,omitempty"`
	// Volumes are the Provisioned Volumes its Containers bind-mount;
	// VolumesError says why they could not be read (only asked when a
	// Container has a bind mount).
	Volumes      []volumes.Mount `json:"volumes,omitempty"`
	VolumesError string          `json:"volumes_error,omitempty"`
}

// RouteView is one Machine's state of one route, with its certificate
// (HTTPS state, expiry, issuer, last error; empty when HTTPS is off).
type RouteView struct {
	Machine     string   `json:"machine"`
	Route       string   `json:"route,omitempty"`
	State       string   `json:"state,omitempty"`
	Detail      string   `json:"detail,omitempty"`
	Upstreams   []string `json:"upstreams,omitempty"`
	Certificate string   `json:"certificate,omitempty"`
	Error       string   `json:"error,omitempty"`
}

// Container is one Service Container and the Machine holding it.
type Container struct {
	Machine string `json:"machine"`
	rpc.ContainerObservation
	LastExit string `json:"last_exit"`
}

// Deploys is the Deploys page: the Deploys this computer ran (live while
// they run, then each Machine's outcome), Saved State revisions and what
// each Machine runs of each namespace now.
type Deploys struct {
	// Records are the operator store's newest Deploy records, newest
	// first; LastOutcomes folds them per namespace and Machine.
	Records      []deploy.Record       `json:"records"`
	LastOutcomes []deploy.LastOutcome  `json:"last_outcomes"`
	Revisions    []Revision            `json:"revisions"`
	Running      []NamespaceDeployment `json:"running"`
}

// Revision is one Saved State revision.
type Revision struct {
	Namespace   string    `json:"namespace"`
	Project     string    `json:"project"`
	Environment string    `json:"environment"`
	Revision    int       `json:"revision"`
	CreatedAt   time.Time `json:"created_at"`
	Latest      bool      `json:"latest"`
}

// NamespaceDeployment is the deployments one Machine's Containers of a
// namespace carry: the evidence of which Deploy reached it.
type NamespaceDeployment struct {
	Namespace   string   `json:"namespace"`
	Machine     string   `json:"machine"`
	Deployments []string `json:"deployments"`
}

// Volumes is the Volumes page: every Machine's answer to list_volumes
// (`ployz volume ls`), naming a Machine without a ZFS pool or that did
// not answer, and the Containers that mount a volume.
type Volumes struct {
	Machines []VolumeMachine `json:"machines"`
	Mounts   []volumes.Mount `json:"mounts"`
	// MountsError says why the Containers could not be observed (then
	// no volume is known to be unmounted); Unobserved names the Machines
	// whose Containers are missing.
	MountsError string              `json:"mounts_error,omitempty"`
	Unobserved  []deploy.Unobserved `json:"unobserved,omitempty"`
}

// VolumeMachine is one Machine's volumes, with what a person is told of
// a Machine that lists none because it cannot. A Source sets only
// MachineVolumes; the server judges State and Note.
type VolumeMachine struct {
	volumes.MachineVolumes
	// State is "pool", "no_pool" or "no_answer".
	State string `json:"state"`
	Note  string `json:"note,omitempty"`
	// Protection is each volume's protection by name (a Source sets it;
	// the server judges what needs a look). A volume with no automatic
	// snapshot, no Mirror and no declared x-volume has none.
	Protection map[string]VolumeProtection `json:"protection,omitempty"`
}

// VolumeProtection is one volume's x-volume protection: the figures
// `ployz volume inspect` prints (volumerun.Protection, read by the same
// library call) with the Mirror interval its latest Saved State declares.
// A Source sets Protection, MirrorEvery and Error; the server sets the
// rest.
type VolumeProtection struct {
	volumerun.Protection
	// MirrorEvery is the declared mirror.every (e.g. "15m"); empty when
	// none is declared or no Saved State declares the volume.
	MirrorEvery string `json:"mirror_every,omitempty"`
	// Error says why the Cluster's runs could not be read: the lag and
	// the scheduled run are unknown.
	Error string `json:"error,omitempty"`

	// Snapshots is the automatic snapshots as inspect says them.
	Snapshots string `json:"snapshots_line,omitempty"`
	// Lines are each Mirror's lag as inspect says it, Overdue when more
	// than twice MirrorEvery behind.
	Lines []MirrorLine `json:"mirror_lines,omitempty"`
	// FailedRun is the newest scheduled run when it did not end done,
	// with its error, as inspect says it.
	FailedRun string `json:"failed_run,omitempty"`
	// Alert is set when a Mirror is overdue or the last scheduled run
	// failed: the page highlights the volume.
	Alert bool `json:"alert"`
}

// MirrorLine is one Mirror's lag: "Mirror on m2 is 12 min behind (...)".
type MirrorLine struct {
	Machine string `json:"machine"`
	Text    string `json:"text"`
	Overdue bool   `json:"overdue"`
}

// VolumeDetail is one volume's page: `ployz volume inspect` (the list
// carries as much) with the Containers mounting it, and for each snapshot
// the other Machines holding the same point in time (equal GUIDs).
type VolumeDetail struct {
	Machine string          `json:"machine"`
	Pool    string          `json:"pool,omitempty"`
	Volume  rpc.Volume      `json:"volume"`
	Mounts  []volumes.Mount `json:"mounts"`
	// Copies maps a snapshot's name to the Machines (and their volume)
	// holding a snapshot with its GUID.
	Copies      map[string][]SnapshotCopy `json:"copies,omitempty"`
	MountsError string                    `json:"mounts_error,omitempty"`
	// Unanswered are the Machines that did not answer: a copy there is
	// unknown.
	Unanswered []string `json:"unanswered,omitempty"`
	// Protection is its automatic snapshots, each Mirror's lag and a
	// failed scheduled run (nil: none of them, no x-volume declared).
	Protection *VolumeProtection `json:"protection,omitempty"`
}

// SnapshotCopy is a snapshot on another Machine with the same GUID.
type SnapshotCopy struct {
	Machine  string `json:"machine"`
	Volume   string `json:"volume"`
	Snapshot string `json:"snapshot"`
}

// MetricsQuery asks for one Service's (or, without Service, each
// Machine's own) metrics since Since.
type MetricsQuery struct {
	Namespace string
	Service   string
	Since     time.Time
	Until     time.Time
}

// MachineMetrics is one Machine's answer to a metrics query, or why it
// has none: the Observe Store client's own type, so the CLI and the
// dashboard read one shape.
type MachineMetrics = observe.MachineMetrics

// LogLine is one followed line, or a Machine that could not be followed.
type LogLine struct {
	Machine   string `json:"machine,omitempty"`
	Container string `json:"container,omitempty"`
	Time      string `json:"time,omitempty"`
	Text      string `json:"text,omitempty"`
	Error     string `json:"error,omitempty"`
	// Stream is "down" when Machine's stream broke (Error says why; it is
	// reopened in RetrySeconds) and "up" when it was reopened.
	Stream       string  `json:"stream,omitempty"`
	RetrySeconds float64 `json:"retry_seconds,omitempty"`
}
