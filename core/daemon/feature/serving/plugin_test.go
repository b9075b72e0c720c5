package serving

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
)

// recordedConfigs records the specs handed to each plugin (nil: cleared).
type recordedConfigs struct {
	mu    sync.Mutex
	specs map[string][]byte
	calls int
}

func (r *recordedConfigs) SetConfig(_ context.Context, name string, spec []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.specs == nil {
		r.specs = map[string][]byte{}
	}
	r.specs[name] = spec
	r.calls++
	return nil
}

// TestStopClearsRemovesAndStops is the reset path: the plugin's spec is
// cleared at the host, the files it kept are removed, and its unit is
// stopped; without a plugin host the files and unit still go.
func TestStopClearsRemovesAndStops(t *testing.T) {
	h := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating})
	cfg := &recordedConfigs{}
	h.configs = cfg
	f := h.feature()
	p := f.IngressPlugin()
	for _, k := range p.Kept {
		if err := os.WriteFile(k, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f.Stop(context.Background(), p)
	if spec, ok := cfg.specs[IngressPlugin]; !ok || spec != nil {
		t.Fatalf("the host's config was not cleared: %q (set %v)", spec, ok)
	}
	for _, k := range p.Kept {
		if _, err := os.Stat(k); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the reset (%v)", k, err)
		}
	}
	if want := []string{"stop " + pluginhost.UnitName(IngressPlugin)}; !slices.Equal(h.units.calls, want) {
		t.Fatalf("units %v, want %v", h.units.calls, want)
	}

	h.configs = nil
	f.Stop(context.Background(), f.DNSPlugin())
	if len(h.units.calls) != 2 {
		t.Fatalf("without a plugin host the unit was not stopped: %v", h.units.calls)
	}
}

// TestConfigureRefusesBeforeHanding: a spec the plugin would refuse is
// never handed over, and without a plugin host configuring fails.
func TestConfigureRefusesBeforeHanding(t *testing.T) {
	h := newHost(t, machine.Record{ID: "abc", Phase: machine.Participating}) // no subnet: DNS cannot listen
	cfg := &recordedConfigs{}
	h.configs = cfg
	f := h.feature()
	if err := f.Configure(context.Background(), f.DNSPlugin()); err == nil {
		t.Fatal("a DNS spec without a subnet was handed over")
	}
	bad := Plugin{Name: "x", Spec: func() ([]byte, error) { return []byte("{}"), nil }, Check: func([]byte) error { return errors.New("spec: no") }}
	if err := f.Configure(context.Background(), bad); err == nil || err.Error() != "derived spec: no" {
		t.Fatalf("configure with a refused spec: %v", err)
	}
	if cfg.calls != 0 {
		t.Fatalf("%d specs handed over", cfg.calls)
	}
	h.configs = nil
	if err := f.Configure(context.Background(), f.IngressPlugin()); err == nil || err.Error() != "no plugin host" {
		t.Fatalf("configure without a plugin host: %v", err)
	}
}
