package serving

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Host is what the serving feature needs of the daemon.
type Host interface {
	feature.StoreHost
	// Machine is this Machine's record.
	Machine() machine.Record
	// RecordChange is closed at the record's next change of phase or
	// labels, so a plugin follows the acceptance flags at once.
	RecordChange() <-chan struct{}
	// WatchStore follows queries on this Machine's store until ctx ends.
	WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch
	// Members is the store's membership view keyed by member (Machine) ID.
	Members(ctx context.Context) map[string]rpc.Member
	// Plugins is the plugin host, nil without one.
	Plugins() feature.Plugins
	// PluginConfigs hands plugins their specs, nil without a plugin host.
	PluginConfigs() Configs
	// Units stops the plugins' systemd units.
	Units() Units
	// TrustedMachinesPath is the trust list DNS and ingress read.
	TrustedMachinesPath() string
	// RunDir and DataDir are ployzd's runtime and state directories.
	RunDir() string
	DataDir() string
	// StoreSocket is the store API's unix socket.
	StoreSocket() string
}

// Configs hands a plugin its spec (pluginhost.Host.SetConfig); nil
// clears it, and a process started again then waits unconfigured.
type Configs interface {
	SetConfig(ctx context.Context, name string, spec []byte) error
}

var _ Configs = (*pluginhost.Host)(nil)

// Units stops systemd units and reloads their files (the daemon's
// Units, narrowed to what serving does with them).
type Units interface {
	Stop(ctx context.Context, name string) error
	Reload(ctx context.Context) error
}

// Files are the host-wide spec files the plugins read; a test aims them
// at its own files, never at this host's.
type Files struct {
	DNSSpec     string // dns.DefaultSpecPath
	IngressSpec string // ingress.DefaultSpecPath
}

// Feature is the serving feature over a Host. It keeps no state of its
// own: every loop re-derives from the record and the store.
type Feature struct {
	host  Host
	log   hclog.Logger
	files Files
}

// New returns the feature over host.
func New(host Host, log hclog.Logger, files Files) *Feature {
	return &Feature{host: host, log: log, files: files}
}

// Routes are the serving commands.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.ReadIngressStatus, f.ingressStatus),
		rpc.Bind(rpc.MoveServingPointer, f.moveServingPointer),
		rpc.Bind(rpc.ReadServingStatus, f.servingStatus),
	}
}
