package certificates

import (
	"encoding/json"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

var _ Host = featuretest.StoreHost{}

// newTest is the feature on a Machine with a Cluster secret over a new
// store, and that Machine's data directory.
func newTest(t *testing.T) (*Feature, *sdkstore.Client, string) {
	t.Helper()
	h, st := featuretest.Store(t, "m1id")
	featuretest.ClusterSecret(t, h.Dir)
	return New(h), st, h.Dir
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
