package serving

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/serving"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// testHost is the daemon as the serving feature sees it: a record, a
// store client (none: a Machine without a store yet), real directories,
// and units that record what was asked of them. No membership view: no
// store admin socket runs in these tests, as on a Machine whose store
// answers no membership.
type testHost struct {
	rec     machine.Record
	st      *sdkstore.Client
	run     string
	data    string
	plugins feature.Plugins
	configs Configs
	units   *recordedUnits
}

func newHost(t testing.TB, rec machine.Record) *testHost {
	return &testHost{rec: rec, run: t.TempDir(), data: "/var/lib/ployz", units: &recordedUnits{}}
}

func (h *testHost) feature() *Feature {
	return New(h, hclog.NewNullLogger(), Files{DNSSpec: filepath.Join(h.run, "dns.json"), IngressSpec: filepath.Join(h.run, "ingress.json")})
}

func (h *testHost) Store() (*sdkstore.Client, error) {
	if h.st == nil {
		return nil, rpc.Errorf(rpc.CodeFailedPrecond, "this Machine is %s: it has no store yet", h.rec.Phase)
	}
	return h.st, nil
}

func (h *testHost) MachineID() string                             { return h.rec.ID }
func (h *testHost) Machine() machine.Record                       { return h.rec }
func (h *testHost) RecordChange() <-chan struct{}                 { return nil }
func (h *testHost) Plugins() feature.Plugins                      { return h.plugins }
func (h *testHost) PluginConfigs() Configs                        { return h.configs }
func (h *testHost) Units() Units                                  { return h.units }
func (h *testHost) RunDir() string                                { return h.run }
func (h *testHost) DataDir() string                               { return h.data }
func (h *testHost) StoreSocket() string                           { return filepath.Join(h.run, "store", "api.sock") }
func (h *testHost) TrustedMachinesPath() string                   { return filepath.Join(h.run, serving.TrustedFileName) }
func (h *testHost) Members(context.Context) map[string]rpc.Member { return map[string]rpc.Member{} }

func (h *testHost) WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch {
	do := func(f func(*sdkstore.Client) error) error {
		st, err := h.Store()
		if err != nil {
			return err
		}
		return f(st)
	}
	return sdkstore.NewWatch(ctx, do, queries, hclog.NewNullLogger())
}

// recordedUnits records the unit calls; none fails.
type recordedUnits struct {
	mu    sync.Mutex
	calls []string
}

func (r *recordedUnits) add(c string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recordedUnits) Stop(_ context.Context, u string) error {
	r.add("stop " + u)
	return nil
}

func (r *recordedUnits) Reload(context.Context) error {
	r.add("reload")
	return nil
}
