package client

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/internal/fakecluster"
)

// TestStoreVolumePolicies: a deploy stores the x-volume policies of its
// Provisioned Volumes, a later one without it deletes it, and an entry
// without put_volume_policies refuses only a file declaring one.
func TestStoreVolumePolicies(t *testing.T) {
	fc, s := newFake(t, "m1", "m2")
	ctx := context.Background()
	pol := &volprotect.Policy{Snapshots: volprotect.Retention{Hourly: 24}, Mirror: &volprotect.Mirror{Machine: "m2", Every: "15m"}}
	pvs := []deploy.ProvisionedVolume{{Key: "pgdata", Name: "shop-production-pgdata", Protect: pol}, {Key: "plain", Name: "plain"}}
	if err := s.storeVolumePolicies(ctx, "shop-production", "d1", pvs, true); err != nil {
		t.Fatal(err)
	}
	fc.Lock()
	got, ok := fc.VolumePolicies["shop-production-pgdata"]
	n := len(fc.VolumePolicies)
	fc.Unlock()
	if !ok || n != 1 || got.Policy.Mirror.Machine != "m2" || got.Deployment != "d1" {
		t.Fatalf("stored %+v (%d policies)", got, n)
	}
	if err := s.storeVolumePolicies(ctx, "shop-production", "d2", pvs[1:], true); err != nil {
		t.Fatal(err)
	}
	fc.Lock()
	n = len(fc.VolumePolicies)
	fc.Unlock()
	if n != 0 {
		t.Fatalf("a deploy without x-volume left %d policies", n)
	}

	ofc := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdPutVolumePolicies}}, "m1")
	old := New(ofc.Store, ofc.Entry, "lab")
	if err := old.storeVolumePolicies(ctx, "shop-production", "d1", pvs[1:], true); err != nil {
		t.Fatalf("no policy, older entry: %v", err)
	}
	if err := old.storeVolumePolicies(ctx, "shop-production", "d1", pvs, true); err == nil || !strings.Contains(err.Error(), "does not serve put_volume_policies") {
		t.Fatalf("a policy on an older entry: %v", err)
	}
}
