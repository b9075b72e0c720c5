package daemon

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

func TestRoutesServeContainerCommands(t *testing.T) {
	d := &Daemon{cfg: Config{DataDir: t.TempDir(), RunDir: t.TempDir()}, log: hclog.NewNullLogger()}
	d.rec = machine.Record{ID: "m1", Phase: machine.Participating, Subnet: netip.MustParsePrefix("10.210.3.0/24")}
	d.rpc = rpc.NewServer(rpc.Options{})
	d.routes()
	caps := d.rpc.Capabilities()
	for _, c := range []string{rpc.CapListContainers, rpc.CapCreateContainer, rpc.CapStartContainer, rpc.CapWaitReady,
		rpc.CapStopContainer, rpc.CapRemoveContainer, rpc.CapListImages} {
		if !slices.Contains(caps, c) {
			t.Errorf("capability %s not served", c)
		}
	}
	// The Docker-direct log routes are retired in favour of the Log Store's.
	for _, c := range []string{"ployz.container.logs.v1", "ployz.container.follow_logs.v1"} {
		if slices.Contains(caps, c) {
			t.Errorf("retired capability %s still advertised", c)
		}
	}
	if f := d.ctrs.Facts(); f.DNS != "10.210.3.1" || f.Phase != machine.Participating || d.ctrs.Network() != "ployz" {
		t.Errorf("facts %+v network %s", f, d.ctrs.Network())
	}
}

// TestListImagesOverTheContainersDocker: list_images is the images
// feature's, over the Docker of this daemon's Container commands.
func TestListImagesOverTheContainersDocker(t *testing.T) {
	to := newTestOps(t)
	imgs := featuretest.Must[rpc.ImageList](t, featureRoute(t, &Daemon{ctrs: to.containerOps, log: hclog.NewNullLogger()}, rpc.CmdListImages), nil)
	if !slices.ContainsFunc(imgs.Images, func(i rpc.ImageInfo) bool { return slices.Contains(i.Tags, to.Image) }) {
		t.Fatalf("list_images lacks %s", to.Image)
	}
}

// TestRowStoreOnlyWhileAMemberNotResetting: the observe loop publishes
// through the daemon's store while it is a Cluster member, and nowhere
// while it resets (the remover just deleted its rows) or has left.
func TestRowStoreOnlyWhileAMemberNotResetting(t *testing.T) {
	d, st := storeDaemon(t, "m1")
	if got := (featureHost{d}).RowStore(); got != st {
		t.Fatalf("participating: row store %p, want the daemon's %p", got, st)
	}
	d.rec.Phase = machine.Resetting
	if (featureHost{d}).RowStore() != nil {
		t.Fatal("resetting: the observe loop may still write")
	}
	d.rec.Phase = machine.Participating
	d.active = nil
	if (featureHost{d}).RowStore() != nil {
		t.Fatal("not a member: the observe loop may still write")
	}
}
