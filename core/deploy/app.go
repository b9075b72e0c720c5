// Package deploy is the client-side Deploy engine (docs/architecture.md bets 3, 4,
// 8, 10): it turns a compose.yaml into a Deploy Intent, observes every
// Machine's Service Containers into a Snapshot, plans rows against that
// Snapshot and executes the confirmed rows one daemon call at a time,
// reporting completed, failed and never-attempted steps.
//
// Nothing here runs after its command returns; a rerun plans again from
// what the Machines show.
package deploy

import (
	"strings"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/ingress/routeopt"
)

// App is a Deploy Intent: the complete declaration of one project in one
// environment, derived from one Saved State revision. A field left out of
// the compose file is a choice removed.
type App struct {
	Project     string    `json:"project"`
	Environment string    `json:"environment"`
	Services    []Service `json:"services"` // dependency order, then name
	// Warnings name unsupported compose keys and other things ignored.
	Warnings []string `json:"warnings,omitempty"`
	// Files holds the content of every shipped file by digest (the
	// Services' Spec.Files name them). Never serialized: secrets stay in
	// this process until the create request that mounts them.
	Files map[string][]byte `json:"-"`
	// Provisioned are its ployz-zfs volumes, by key.
	Provisioned []ProvisionedVolume `json:"provisioned,omitempty"`
}

// ProvisionedVolume is a compose top-level volume with driver ployz-zfs:
// a Provisioned Volume the Services mounting it bind-mount, created on
// the first deploy when SizeBytes is set and no Machine holds it.
type ProvisionedVolume struct {
	// Key is its key under the compose file's volumes:.
	Key string `json:"key"`
	// Name is the Provisioned Volume's name in the Cluster: name: when
	// set, else <namespace>-<key>.
	Name string `json:"name"`
	// SizeBytes is driver_opts.size; 0 when the volume must already
	// exist (no size given).
	SizeBytes uint64 `json:"size_bytes,omitempty"`
	// Protect is its x-volume: scheduled snapshots and a Mirror kept in
	// Sync (nil: none declared).
	Protect *volprotect.Policy `json:"protect,omitempty"`
}

// Namespace is <project>-<environment>, the ployz.namespace label value.
func (a App) Namespace() string { return Namespace(a.Project, a.Environment) }

// Namespace joins a project and environment into a namespace.
func Namespace(project, environment string) string { return project + "-" + environment }

// Service modes.
const (
	ModeReplicated = "replicated"
	ModeGlobal     = "global"
)

// Service is one declared Service.
type Service struct {
	Name string `json:"name"`
	// Mode is replicated (Replicas Containers spread over eligible
	// Machines) or global (one per eligible Machine).
	Mode     string `json:"mode"`
	Replicas int    `json:"replicas"`
	// Spec is the Container template: Namespace, Service, Image and the
	// rest are set; ServiceID, DeploymentID and SpecHash are per deploy.
	Spec          rpc.ContainerSpec `json:"spec"`
	Constraints   []rpc.Constraint  `json:"constraints,omitempty"`
	MaxPerMachine int               `json:"max_per_machine,omitempty"` // 0: no limit
	// Roles are the Machine roles it runs on (x-placement roles): only
	// Machines with every one are eligible.
	Roles []string `json:"roles,omitempty"`
	// Volumes are the Docker names of the named volumes it mounts; they
	// pin the Service to the Machine that holds them.
	Volumes []string `json:"volumes,omitempty"`
	// Provisioned are the Provisioned Volumes it bind-mounts
	// (volume.MountRoot/<name>): they pin it to the Machine whose copy is
	// the Writer.
	Provisioned []string       `json:"provisioned,omitempty"`
	HostPorts   []int          `json:"host_ports,omitempty"`
	Hooks       []Hook         `json:"pre_deploy,omitempty"`
	Ingress     []IngressRoute `json:"ingress,omitempty"`
	DependsOn   []string       `json:"depends_on,omitempty"`
	// StopGraceSeconds is compose's stop_grace_period (0: the daemon's default).
	StopGraceSeconds int `json:"stop_grace_seconds,omitempty"`
	// PullPolicy is compose's pull_policy (always, missing or never; ""
	// is missing).
	PullPolicy string `json:"pull_policy,omitempty"`
	// UpdateOrder is deploy.update_config.order: start-first or
	// stop-first; "" lets the plan choose (start-first unless a host
	// port or a single Container on a volume needs stop-first).
	UpdateOrder string `json:"update_order,omitempty"`
	// Build is compose's build: the image is built on the operator's
	// computer and pushed to the Machines that lack it, never pulled.
	Build *Build `json:"build,omitempty"`
	// Schedule makes the Service a scheduled job (x-schedule): a deploy
	// stores its run spec instead of starting Containers, and the
	// Machines' schedulers start a run per tick (core/jobs).
	Schedule *jobs.Schedule `json:"schedule,omitempty"`
}

// Build is one Service's build: section, its context an absolute path.
type Build struct {
	// Repo names the built image; builds tag it Repo:<content id>.
	Repo       string            `json:"repo"`
	Context    string            `json:"context"`
	Dockerfile string            `json:"dockerfile,omitempty"`
	Target     string            `json:"target,omitempty"`
	Args       map[string]string `json:"args,omitempty"`
	// Secrets are build.secrets: each served to RUN --mount=type=secret
	// under its id (the reference's target, else its source), read from a
	// file or this computer's environment; never the value itself.
	Secrets []images.BuildSecret `json:"secrets,omitempty"`
	// SSH are build.ssh entries: "default" or "ID=PATH".
	SSH []string `json:"ssh,omitempty"`
	// AdditionalContexts are build.additional_contexts: an absolute
	// directory, or a source with a scheme (docker-image://...).
	AdditionalContexts map[string]string `json:"additional_contexts,omitempty"`
	// CacheFrom are build.cache_from entries.
	CacheFrom []string `json:"cache_from,omitempty"`
}

// Hook is one x-pre_deploy command, run once in a Container of the
// Service's new spec before the Service's Containers are replaced.
type Hook struct {
	Command        []string `json:"command"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
	// Environment is merged over the Service's environment.
	Environment map[string]string `json:"environment,omitempty"`
}

// IngressRoute is one x-ports ingress route: a hostname (HTTP), or with
// Protocol "tcp" a Port every ingress Machine listens on (x-ports
// ingress_port). It is also stamped on every Container's spec
// (rpc.ContainerSpec.Ingress), from which the Ingress Proxies route.
type IngressRoute struct {
	Hostname      string `json:"hostname"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol,omitempty"` // "" is http; tcp
	Port          int    `json:"port,omitempty"`     // tcp only
	// Path and Options are an HTTP route's (rpc.IngressRoute).
	Path string `json:"path,omitempty"`
	routeopt.Options
}

// Key names the route as the Ingress Proxies report it: its hostname and
// path, or "tcp/PORT".
func (r IngressRoute) Key() string {
	return ingress.Route{Hostname: r.Hostname, Path: r.Path, Protocol: r.Protocol, Port: r.Port}.Key()
}

// Extended reports whether the route uses what only Machines with
// rpc.CapContainerRoutes carry into their rows: a path, a wildcard
// hostname or any option.
func (r IngressRoute) Extended() bool {
	return r.Path != "" || strings.HasPrefix(r.Hostname, "*.") || r.Options != (routeopt.Options{})
}

// Redirects reports whether the route answers 308 to another hostname
// (x-ports redirect_from), which only Machines with
// rpc.CapContainerRedirects carry into their rows.
func (r IngressRoute) Redirects() bool { return r.RedirectTo != "" }

// The Ployz compose extensions on a service.
//
//	x-ports:                      # ingress hostnames, ingress TCP ports and host ports
//	  - hostname: app.example.com # HTTP ingress route (needs container_port);
//	    container_port: 8080      # a wildcard *.example.com matches one label
//	    path: /api                # optional prefix, whole segments; longest wins
//	    strip_prefix: true        # the Container sees /users for /api/users
//	    redirect_https: false     # default: 308 to HTTPS once a certificate is loaded
//	    max_body_size: 10m        # larger request bodies: 413
//	    response_timeout: 90s     # no response headers by then: 504
//	    headers: {request: {set: {X-Env: prod}, remove: [X-Debug]}, response: {set: {...}, remove: [Server]}}
//	    basic_auth: {realm: staff, users: {alice: "$2y$10$..."}}  # bcrypt hashes
//	    compress: true            # gzip text answers for clients that accept it
//	    redirect_from: [www.example.com]  # 308 to hostname, same path and query
//	    upstream_protocol: h2c    # the Container speaks HTTP/2 without TLS (or grpc; default http1)
//	  - ingress_port: 5432        # TCP ingress route: port 5432 of every
//	    container_port: 5432      # Machine's Ingress Proxy (protocol tcp only;
//	    protocol: tcp             # not 53, 80, 443, 7569-7571 or 51820)
//	  - host_port: 8443           # publish on every Machine running it
//	    container_port: 8443
//	    protocol: tcp             # tcp (default) or udp
//	x-placement:
//	  constraints: ["region==eu", "disk!=hdd"]  # Machine labels
//	  roles: [db]                 # only Machines labelled ployz.role.db
//	                              # (Machines whose ployz.accepts leaves out
//	                              # services never get Service Containers)
//	  mode: replicated            # or global (default: deploy.mode, else replicated)
//	  max_per_machine: 1          # 0 or absent: no limit
//	x-pre_deploy:                 # run once before the Service is replaced
//	  - command: ["/testapp", "migrate"]
//	    timeout_seconds: 120      # default 300
//	    environment: {MODE: migrate}  # merged over the service's environment
//	x-socket-activation: true     # the Machine holds the Service's one TCP host
//	                              # port and passes it as fd 3 (LISTEN_FDS=1);
//	                              # no ingress routes (docs/socket-activation.md)
//	x-readiness: healthcheck      # healthcheck | notify | none
//	                              # default: healthcheck when one is declared, else none
//	                              # notify: a live process inside the Container sends
//	                              # READY=1 to $NOTIFY_SOCKET (README)
type xPort struct {
	Hostname      string `json:"hostname"`
	HostPort      int    `json:"host_port"`
	IngressPort   int    `json:"ingress_port"`
	ContainerPort int    `json:"container_port"`
	Protocol      string `json:"protocol"`
	Path          string `json:"path"`
	StripPrefix   bool   `json:"strip_prefix"`
	RedirectHTTPS *bool  `json:"redirect_https"`
	// MaxBodySize is a number of bytes or a size string.
	MaxBodySize     any                 `json:"max_body_size"`
	ResponseTimeout string              `json:"response_timeout"`
	Headers         *routeopt.Headers   `json:"headers"`
	BasicAuth       *routeopt.BasicAuth `json:"basic_auth"`
	Compress        bool                `json:"compress"`
	// RedirectFrom are hostnames answering 308 to Hostname.
	RedirectFrom []string `json:"redirect_from"`
	// UpstreamProtocol: http1 (default), h2c or grpc (the same as h2c).
	UpstreamProtocol string `json:"upstream_protocol"`
	// TLS on_demand: a wildcard route's names get certificates at their
	// first handshake (routeopt.TLSOnDemand).
	TLS string `json:"tls"`
}

type xPlacement struct {
	Constraints   []string `json:"constraints"`
	Roles         []string `json:"roles"`
	Mode          string   `json:"mode"`
	MaxPerMachine int      `json:"max_per_machine"`
}

type xHook struct {
	Command        []string          `json:"command"`
	TimeoutSeconds int               `json:"timeout_seconds"`
	Environment    map[string]string `json:"environment"`
}

// Readiness gates.
const (
	ReadyHealthcheck = "healthcheck"
	ReadyNotify      = "notify"
	ReadyNone        = "none"
)
