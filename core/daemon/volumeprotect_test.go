package daemon

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volprotect"
)

// TestPutVolumePolicies: put_volume_policies stores a namespace's
// x-volume policies, pruning those no longer declared and keeping a
// policy's since; every Machine's Protector reads them back; a bad
// policy is refused naming the field.
func TestPutVolumePolicies(t *testing.T) {
	d, st := storeDaemon(t, "m1")
	ctx := context.Background()
	hourly := volprotect.Policy{Snapshots: volprotect.Retention{Hourly: 24}}
	mirrored := volprotect.Policy{Snapshots: volprotect.Retention{Daily: 7}, Mirror: &volprotect.Mirror{Machine: "m2", Every: "15m"}}
	put := func(req rpc.PutVolumePoliciesRequest) (rpc.VolumePoliciesPut, error) {
		res, err := hcall(t, typed(d.putVolumePolicies), req)
		if err != nil {
			return rpc.VolumePoliciesPut{}, err
		}
		return res.(rpc.VolumePoliciesPut), nil
	}
	if _, err := put(rpc.PutVolumePoliciesRequest{Namespace: "shop-prod", Policies: []rpc.VolumePolicyDecl{{Volume: "pg", Policy: hourly}, {Volume: "cache", Policy: hourly}}}); err != nil {
		t.Fatal(err)
	}
	first, _, _ := store.VolumePolicies(st).Get(ctx, "pg")
	got, err := put(rpc.PutVolumePoliciesRequest{Namespace: "shop-prod", Policies: []rpc.VolumePolicyDecl{{Volume: "pg", Policy: mirrored}}, Prune: true})
	if err != nil || len(got.Removed) != 1 || got.Removed[0] != "cache" {
		t.Fatalf("put = %+v, %v; want cache removed", got, err)
	}
	ds, err := storedPolicies(ctx, st)
	if err != nil || len(ds) != 1 || ds[0].Volume != "pg" || ds[0].Policy.Mirror == nil || ds[0].Policy.Mirror.Machine != "m2" {
		t.Fatalf("stored = %+v, %v", ds, err)
	}
	again, _, _ := store.VolumePolicies(st).Get(ctx, "pg")
	if again.Body.Since != first.Body.Since {
		t.Fatalf("since changed: %d, was %d", again.Body.Since, first.Body.Since)
	}
	bad := volprotect.Policy{Mirror: &volprotect.Mirror{Machine: "m2", Every: "5s"}}
	if _, err := put(rpc.PutVolumePoliciesRequest{Namespace: "shop-prod", Policies: []rpc.VolumePolicyDecl{{Volume: "pg", Policy: bad}}}); !isField(err, "policies[].policy") {
		t.Fatalf("bad policy: %v", err)
	}
}
