package observe

import (
	"net/netip"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
)

// MetricsPort is where the metrics plugin serves Prometheus' text
// format on the Machine's mesh address.
const MetricsPort = 9101

// Host is what the feature needs of the daemon.
type Host interface {
	// Machine is this Machine's record (its ID and labels).
	Machine() machine.Record
	// Plugins is the plugin host; nil while there is none.
	Plugins() feature.Plugins
	// ManagementIP is this Machine's mesh address.
	ManagementIP() (netip.Addr, error)
	// RunDir is the daemon's runtime directory (the counters file's).
	RunDir() string
	// PluginStatus is each plugin's state, their dropped store events
	// among it; nil without a plugin host.
	PluginStatus() []pluginhost.PluginStatus
	// JobRuns and VolumeProtection are what this Machine's Scheduler and
	// protect loop counted.
	JobRuns() []sdkobserve.JobRuns
	VolumeProtection() []sdkobserve.VolumeProtection
}

// Feature serves the Observe Store's commands and keeps the counters
// file the metrics plugin reads.
type Feature struct {
	host Host
	log  hclog.Logger
}

// New returns the feature over host.
func New(host Host, log hclog.Logger) *Feature { return &Feature{host: host, log: log} }

// Routes are query_metrics, log_history and tail_logs' advertisement.
func (f *Feature) Routes() []rpc.Route {
	return slices.Concat([]rpc.Route{f.metricsRoute()}, f.logRoutes())
}

// Streams are tail_logs.
func (f *Feature) Streams() []rpc.StreamRoute {
	return []rpc.StreamRoute{rpc.BindStream(rpc.TailLogs, f.tailLogs)}
}

// available is whether a healthy plugin serves capability.
func (f *Feature) available(capability string) bool {
	p := f.host.Plugins()
	return p != nil && p.Available(capability)
}
