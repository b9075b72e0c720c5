package volumes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
)

// TestSnapshotInfos: each snapshot says whether it is automatic and,
// under a retention, whether the Protector keeps it and by which rules;
// an operator's snapshot is never kept or pruned by retention, and
// without a policy nothing is marked kept.
func TestSnapshotInfos(t *testing.T) {
	now := time.Date(2026, 12, 7, 11, 30, 0, 0, time.UTC)
	at := func(h, m int) int64 { return time.Date(2026, 12, 7, h, m, 0, 0, time.UTC).UnixNano() }
	snaps := []rpc.VolumeSnapshot{
		{Name: "before-upgrade", Created: at(8, 0), UsedBytes: 4096},
		{Name: "auto-20261207-0900", Created: at(9, 0)},
		{Name: "auto-20261207-1000", Created: at(10, 0)},
		{Name: "auto-20261207-1100", Created: at(11, 0), UsedBytes: 8192},
	}
	got := snapshotInfos(snaps, &volprotect.Retention{Hourly: 2}, now)
	want := []struct {
		auto, kept bool
		rules      string
	}{{false, false, ""}, {true, false, ""}, {true, true, "hourly"}, {true, true, "newest,hourly"}}
	if len(got) != len(want) {
		t.Fatalf("got %d snapshots, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != snaps[i].Name || g.Auto != w.auto || g.Kept != w.kept || strings.Join(g.Rules, ",") != w.rules || g.UsedBytes != snaps[i].UsedBytes {
			t.Errorf("%s: %+v, want auto %v kept %v rules %q", snaps[i].Name, g, w.auto, w.kept, w.rules)
		}
	}
	for _, g := range snapshotInfos(snaps, nil, now) {
		if g.Kept || g.Rules != nil {
			t.Errorf("no policy: %+v marked kept", g)
		}
	}
}

// TestStoredRetention reads a volume's retention from the Cluster's
// volume_policies: none declared (or one keeping no snapshots) is nil.
func TestStoredRetention(t *testing.T) {
	f, st := newTest(t, "m1")
	ctx := context.Background()
	_, err := featuretest.Call(t, featuretest.Typed(f.putVolumePolicies), rpc.PutVolumePoliciesRequest{Namespace: "shop-prod", Policies: []rpc.VolumePolicyDecl{
		{Volume: "pg", Policy: volprotect.Policy{Snapshots: volprotect.Retention{Hourly: 24, Daily: 7}}},
		{Volume: "cache", Policy: volprotect.Policy{Mirror: &volprotect.Mirror{Machine: "m2", Every: "15m"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := storedRetention(ctx, st, "pg"); err != nil || r == nil || *r != (volprotect.Retention{Hourly: 24, Daily: 7}) {
		t.Fatalf("pg: %+v, %v", r, err)
	}
	for _, name := range []string{"cache", "nosuch"} {
		if r, err := storedRetention(ctx, st, name); err != nil || r != nil {
			t.Errorf("%s: %+v, %v; want nil", name, r, err)
		}
	}
}
