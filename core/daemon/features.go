package daemon

import (
	"context"
	"net/netip"
	"slices"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/allocations"
	"github.com/ployz/ployz/core/daemon/feature/certificates"
	"github.com/ployz/ployz/core/daemon/feature/history"
	"github.com/ployz/ployz/core/daemon/feature/images"
	jobsfeature "github.com/ployz/ployz/core/daemon/feature/jobs"
	"github.com/ployz/ployz/core/daemon/feature/leases"
	obsfeature "github.com/ployz/ployz/core/daemon/feature/observe"
	"github.com/ployz/ployz/core/daemon/feature/savedstate"
	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/core/daemon/feature/upgrade"
	"github.com/ployz/ployz/core/daemon/feature/volumes"
	"github.com/ployz/ployz/core/jobs"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/observe"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// featureRoutes registers the routes of the features under
// core/daemon/feature.
func (d *Daemon) featureRoutes() {
	routes, streams := features(featureHost{d})
	// Streams first: HandleStream catalogues a stream as always served,
	// and a feature's route of the same command (advertised only while
	// its plugin serves) replaces that entry.
	for _, r := range streams {
		d.rpc.HandleStream(r)
	}
	for _, r := range routes {
		d.rpc.Handle(r)
	}
}

// features are the routes of every feature over h.
func features(h featureHost) ([]rpc.Route, []rpc.StreamRoute) {
	img, upg := images.New(h, h.d.log.Named("images")), upgrade.New(h, h.d.log)
	vols, obs := h.d.volumes(), h.d.obs()
	routes := slices.Concat(img.Routes(), upg.Routes(), history.New(h).Routes(), savedstate.New(h).Routes(), allocations.New(h).Routes(), certificates.New(h).Routes(), h.d.serving().Routes(), h.d.leaseFeature().Routes(), h.d.jobFeature().Routes(), vols.Routes(), obs.Routes())
	return routes, slices.Concat(img.Streams(), upg.Streams(), vols.Streams(), obs.Streams())
}

// leaseFeature is the lease feature, made once: its grant lock is this
// Machine's.
func (d *Daemon) leaseFeature() *leases.Feature {
	d.leaseOnce.Do(func() { d.lease = leases.New(featureHost{d}, d.log) })
	return d.lease
}

// jobFeature is the scheduled-jobs feature, made once: its Scheduler's
// outcomes are this Machine's.
func (d *Daemon) jobFeature() *jobsfeature.Feature {
	d.jobOnce.Do(func() { d.job = jobsfeature.New(featureHost{d}, d.log) })
	return d.job
}

// featureHost is the daemon as its features see it: the Host interface
// each feature declares, kept off *Daemon so the daemon type stays its
// lifecycle and wiring.
type featureHost struct{ d *Daemon }

var (
	_ images.Host         = featureHost{}
	_ feature.StoreHost   = featureHost{}
	_ savedstate.Host     = featureHost{}
	_ volumes.Host        = featureHost{}
	_ obsfeature.Host     = featureHost{}
	_ certificates.Host   = featureHost{}
	_ jobsfeature.Host    = featureHost{}
	_ upgrade.Host        = featureHost{}
	_ servingfeature.Host = featureHost{}
)

// Docker is this Machine's Docker client; nil while it has none.
func (h featureHost) Docker() client.APIClient { return h.d.ctrs.Docker() }

func (h featureHost) Local() (id, name string) { return h.d.local() }

func (h featureHost) Peers(ctx context.Context) ([]rpc.Peer, error) { return h.d.peers(ctx) }

func (h featureHost) DialPeer(ctx context.Context, p rpc.Peer) (*rpc.Client, error) {
	return h.d.dialPeer(ctx, p)
}

func (h featureHost) Store() (*sdkstore.Client, error) { return h.d.storeClient() }

func (h featureHost) MachineID() string { return h.d.record().ID }

func (h featureHost) DataDir() string { return h.d.cfg.DataDir }

func (h featureHost) Machine() machine.Record { return h.d.record() }

// Plugins is the plugin host, nil (not a nil *pluginhost.Host) without one.
func (h featureHost) Plugins() feature.Plugins {
	if h.d.plugins == nil {
		return nil
	}
	return h.d.plugins
}

func (h featureHost) VolumePort() int { return h.d.cfg.VolumePort }

func (h featureHost) TaskJob(req rpc.VolumeTaskRequest) (volumecopy.Job, error) {
	return h.d.ctrs.TaskJob(req)
}

func (h featureHost) WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch {
	return h.d.watchStore(ctx, queries...)
}

func (h featureHost) ManagementIP() (netip.Addr, error) {
	k, err := h.d.publicKey()
	if err != nil {
		return netip.Addr{}, err
	}
	return meshaddr.ManagementIP(k), nil
}

func (h featureHost) RunDir() string { return h.d.cfg.RunDir }

func (h featureHost) Socket() string { return h.d.cfg.Socket }

func (h featureHost) PluginStatus() []pluginhost.PluginStatus {
	if h.d.plugins == nil {
		return nil
	}
	return h.d.plugins.Status()
}

func (h featureHost) JobRuns() []observe.JobRuns { return h.d.jobFeature().Outcomes().Snapshot() }

func (h featureHost) VolumeProtection() []observe.VolumeProtection {
	return h.d.volumes().ProtectOutcomes().Snapshot()
}

// Settle waits for a concurrent claim to reach st, as a lease grant does.
func (h featureHost) Settle(ctx context.Context, st *sdkstore.Client) {
	h.d.leaseFeature().Settle(ctx, st)
}

func (h featureHost) RecordChange() <-chan struct{} { return h.d.recordChange() }

func (h featureHost) Members(ctx context.Context) map[string]rpc.Member { return h.d.members(ctx) }

// PluginConfigs is the plugin host, nil (not a nil *pluginhost.Host)
// without one.
func (h featureHost) PluginConfigs() servingfeature.Configs {
	if h.d.plugins == nil {
		return nil
	}
	return h.d.plugins
}

func (h featureHost) Units() servingfeature.Units { return h.d.cfg.Units }

func (h featureHost) TrustedMachinesPath() string { return h.d.trustedMachinesPath() }

func (h featureHost) StoreSocket() string { return h.d.storeSocket() }

// AdmitsJob: this Machine runs a job only when its Container commands
// would admit the run (containers.Ops.AdmitsJob).
func (h featureHost) AdmitsJob(ctx context.Context, job store.JobBody) bool {
	return h.d.ctrs.AdmitsJob(ctx, job)
}

// JobRunner starts this Machine's job runs; nil without Docker.
func (h featureHost) JobRunner() jobs.Runner { return h.d.ctrs.JobRunner() }

// RowStore is where the observe loop publishes this Machine's rows:
// none while it is not a Cluster member or is resetting.
func (h featureHost) RowStore() *sdkstore.Client {
	a := h.d.act()
	if a == nil || h.d.record().Phase == machine.Resetting {
		return nil
	}
	return a.store
}

func (h featureHost) CredentialSealer(ctx context.Context, st *sdkstore.Client) *sdkstore.Sealer {
	return h.d.credentialSealer(ctx, st)
}
