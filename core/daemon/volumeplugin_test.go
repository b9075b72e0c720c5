package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/sdk/plugintest"
	"github.com/ployz/ployz/sdk/volume"
)

// TestVolumePluginStartsWithPool: the on-demand volume plugin stays
// stopped (its unit not started) while the Machine has no ZFS pool, and
// its unit is started as soon as the pool label is set. The plugin is
// pluginhost's test plugin built under the volume plugin's name; systemd
// is the recording fake (no systemd in the test).
func TestVolumePluginStartsWithPool(t *testing.T) {
	bin, err := plugintest.BuildTo(t.TempDir(), "github.com/ployz/ployz/core/pluginhost/testdata/testplugin", "-X main.name="+VolumePlugin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := pluginhost.InstallEntry(dir, bin, pluginhost.Entry{Name: VolumePlugin, Lifecycle: pluginhost.LifecycleLongLived, OnDemand: true}); err != nil {
		t.Fatal(err)
	}
	u := &units{}
	h, err := pluginhost.New(pluginhost.Config{Dir: dir, SocketDir: t.TempDir(), Units: u})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	d := &Daemon{cfg: Config{DataDir: t.TempDir()}, log: hclog.NewNullLogger(), plugins: h,
		rec: machine.Record{ID: "m1", Name: "m1", Phase: machine.Participating}}
	go d.wakeVolumePlugin(ctx)

	start := "start " + pluginhost.UnitName(VolumePlugin)
	time.Sleep(300 * time.Millisecond)
	if slices.Contains(u.seen(), start) {
		t.Fatalf("volume plugin started without a pool: %v", u.seen())
	}
	// The test plugin's capability, read from its binary while stopped.
	if !h.Available("ployz-test.dns.status.v1") {
		t.Fatalf("capability not advertised while stopped: %v", h.Capabilities())
	}

	rec := d.record()
	rec.Labels = map[string]string{volume.PoolLabel: "tank"}
	if err := d.setRecord(rec); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !slices.Contains(u.seen(), start); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool set, volume plugin's unit not started: %v", u.seen())
		}
	}
}
