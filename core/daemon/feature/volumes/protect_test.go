package volumes

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/core/volprotect"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// TestPutVolumePolicies: put_volume_policies stores a namespace's
// x-volume policies, pruning those no longer declared and keeping a
// policy's since; every Machine's Protector reads them back; a bad
// policy is refused naming the field.
func TestPutVolumePolicies(t *testing.T) {
	f, st := newTest(t, "m1")
	ctx := context.Background()
	hourly := volprotect.Policy{Snapshots: volprotect.Retention{Hourly: 24}}
	mirrored := volprotect.Policy{Snapshots: volprotect.Retention{Daily: 7}, Mirror: &volprotect.Mirror{Machine: "m2", Every: "15m"}}
	put := func(req rpc.PutVolumePoliciesRequest) (rpc.VolumePoliciesPut, error) {
		res, err := featuretest.Call(t, featuretest.Typed(f.putVolumePolicies), req)
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

// TestStoredLags: the Writer reads its Mirrors' last syncs from the
// Cluster's Volume Runs, the Cluster's state over the record's.
func TestStoredLags(t *testing.T) {
	_, st := newTest(t, "m1")
	ctx := context.Background()
	put := func(gen uint64, state string, run string) {
		b := store.VolumeRunBody{Volume: "db", Gen: gen, Kind: "sync", State: state, Run: []byte(run)}
		if _, err := store.VolumeRuns(st).Put(ctx, sdkstore.Row[store.VolumeRunBody]{Key: store.VolumeRunKey("db", gen), Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	put(3, "done", `{"volume":"db","gen":3,"kind":"sync","state":"done","started_at":"2026-12-07T05:00:00Z","steps":[{"name":"send","machine":"m2","outcome":"done","bytes":10}]}`)
	put(4, "done", `{"volume":"db","gen":4,"kind":"delete-mirror","target":"m2","state":"done","started_at":"2026-12-07T05:10:00Z","steps":[]}`)
	put(5, "lost", `{"volume":"db","gen":5,"kind":"sync","state":"open","started_at":"2026-12-07T05:20:00Z","steps":[{"name":"send","machine":"m3","outcome":"done"}]}`)
	put(6, "done", `{"gen":"six"}`)
	lags, err := storedLags(ctx, st, "m1", "db")
	if err != nil || len(lags) != 1 || lags[0].Machine != "m3" || lags[0].Gen != 5 {
		t.Fatalf("lags %+v, %v", lags, err)
	}
}
