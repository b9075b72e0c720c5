package observe

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/pluginhost"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
)

// TestCountersOf: the counters file names this daemon's dropped store
// events as ployzd's and each plugin's as its own, by table, and leaves
// out a process that dropped none.
func TestCountersOf(t *testing.T) {
	got := countersOf(map[string]int64{"serving": 3}, []pluginhost.PluginStatus{
		{Name: "dns", StoreEventsDropped: map[string]int64{"containers": 1}},
		{Name: "metrics"},
	})
	want := map[string]map[string]int64{sdkobserve.DaemonProcess: {"serving": 3}, "dns": {"containers": 1}}
	if !reflect.DeepEqual(got.StoreEventsDropped, want) {
		t.Fatalf("counters %v, want %v", got.StoreEventsDropped, want)
	}
	if c := countersOf(nil, []pluginhost.PluginStatus{{Name: "dns"}}); c.StoreEventsDropped != nil {
		t.Fatalf("no drops anywhere: %v", c.StoreEventsDropped)
	}
}

// TestCountersLoopReplacesAStaleFile: the previous ployzd's counts (of
// processes since gone) are replaced at once by this one's.
func TestCountersLoopReplacesAStaleFile(t *testing.T) {
	f := New(testHost{runDir: t.TempDir()}, hclog.NewNullLogger())
	stale := sdkobserve.Counters{StoreEventsDropped: map[string]map[string]int64{"ployzd": {"serving": 9}}}
	if err := sdkobserve.WriteCounters(f.CountersPath(), stale); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.CountersLoop(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := sdkobserve.ReadCounters(f.CountersPath())
		if err != nil {
			t.Fatal(err)
		}
		if c.StoreEventsDropped == nil {
			break // this package's tests run strict: no drops to count
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale counters survived: %v", c.StoreEventsDropped)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(f.CountersPath() + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
}
