package containers

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
)

// TestAnonymousVolume: a volume mount without a source (compose's
// `- /cache`) is Docker's to create with the Container; remove_container
// removes it with it, so nothing is left on the Machine.
func TestAnonymousVolume(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	spec := to.Spec("anon", nil)
	spec.Mounts = []rpc.MountSpec{{Type: "volume", Target: "/cache"}}
	id := to.createStart(t, "anon", spec)
	in, err := to.Cli.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	vol := ""
	for _, m := range in.Mounts {
		if m.Destination == "/cache" && m.Type == "volume" {
			vol = m.Name
		}
	}
	if vol == "" {
		t.Fatalf("no anonymous volume at /cache: %+v", in.Mounts)
	}
	featuretest.Must[map[string]string](t, featuretest.Typed(to.removeContainer), rpc.RemoveContainerRequest{ID: id, Force: true})
	if _, err := to.Cli.VolumeInspect(context.Background(), vol); err == nil {
		t.Fatalf("anonymous volume %s outlived its Container", vol)
	}
}
