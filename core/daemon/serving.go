package daemon

import (
	"context"

	servingfeature "github.com/ployz/ployz/core/daemon/feature/serving"
	"github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/observe"
)

// The serving plugins' names and the Ingress Proxy's listeners
// (feature/serving), re-exported for ployzd's callers.
const (
	DNSPlugin        = servingfeature.DNSPlugin
	IngressPlugin    = servingfeature.IngressPlugin
	IngressListen    = servingfeature.IngressListen
	IngressListenTLS = servingfeature.IngressListenTLS
)

// Host-wide things the reset and upgrade paths remove, variables so that
// a test aims them at its own files and iptables chain, never at this host's.
var (
	dnsSpecFile      = dns.DefaultSpecPath
	ingressSpecFile  = ingress.DefaultSpecPath
	metricsSpecFile  = observe.DefaultMetricsSpecPath
	inputChainPrefix = "" // dockernet's default, PLOYZ
	// runtimeUnitDir is where earlier ployzd versions wrote their units
	// (serving.Feature.RetireOldUnits).
	runtimeUnitDir = "/run/systemd/system"
)

// serving is the serving feature (feature/serving); it keeps no state of
// its own, and reads the spec file variables above when made.
func (d *Daemon) serving() *servingfeature.Feature {
	return servingfeature.New(featureHost{d}, d.log, servingfeature.Files{DNSSpec: dnsSpecFile, IngressSpec: ingressSpecFile})
}

// servingLoops keep every serving plugin configured while this Machine
// is active: DNS, ingress, the Observe Store's two (the metrics one with
// the counters file it reads) and volume-zfs (started once the Machine
// has a pool: it is on demand).
func (d *Daemon) servingLoops() []func(context.Context) {
	sv, obs := d.serving(), d.obs()
	keep := func(p servingfeature.Plugin) func(context.Context) {
		return func(ctx context.Context) { sv.Keep(ctx, p) }
	}
	metrics := func(ctx context.Context) {
		go obs.CountersLoop(ctx)
		sv.Keep(ctx, metricsPlugin(obs))
	}
	vols := func(ctx context.Context) {
		go d.wakeVolumePlugin(ctx)
		sv.Keep(ctx, volumePlugin(d.volumes()))
	}
	return []func(context.Context){keep(sv.DNSPlugin()), keep(sv.IngressPlugin()), metrics,
		keep(logStorePlugin(obs)), vols}
}
