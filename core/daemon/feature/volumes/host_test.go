package volumes

import (
	"context"
	"testing"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// testHost is a participating Machine over a real store, with no plugin
// host and no Docker: what the store-backed commands need.
type testHost struct{ featuretest.StoreHost }

func (h testHost) Machine() machine.Record {
	return machine.Record{ID: h.Self, Name: "self", Phase: machine.Participating}
}
func (testHost) Plugins() feature.Plugins                  { return nil }
func (testHost) Docker() client.APIClient                  { return nil }
func (testHost) Peers(context.Context) ([]rpc.Peer, error) { return nil, nil }
func (testHost) DialPeer(context.Context, rpc.Peer) (*rpc.Client, error) {
	return nil, rpc.Errorf(rpc.CodeUnavailable, "no mesh in this test")
}
func (testHost) VolumePort() int { return 0 }
func (testHost) Socket() string  { return "/nonexistent/ployz.sock" }
func (testHost) TaskJob(rpc.VolumeTaskRequest) (volumecopy.Job, error) {
	return volumecopy.Job{}, rpc.Errorf(rpc.CodeUnavailable, "no Docker in this test")
}
func (h testHost) WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch { return nil }

var _ Host = testHost{}

// newTest is the feature on Machine self over a new store.
func newTest(t *testing.T, self string) (*Feature, *sdkstore.Client) {
	t.Helper()
	h, st := featuretest.Store(t, self)
	return New(context.Background(), testHost{h}, hclog.NewNullLogger()), st
}
