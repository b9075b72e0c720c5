package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/footprint"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// resetAndUninstall runs at the end of TestCluster, on its three
// Machines: `machine reset m3` makes m3 leave (gone from m1's and m2's
// machine ls) with ployzd still installed, and `machine add` takes it
// back; `machine uninstall m3` then leaves and removes Ployz's footprint,
// and the footprint survey on m3 (the same list the uninstall removes)
// finds nothing, while m1 and m2 go on as a Cluster of two.
func resetAndUninstall(ctx context.Context, t *testing.T, l *lab.Lab, op *operator) {
	m3, err := l.Machine("m3")
	if err != nil {
		t.Fatal(err)
	}
	dest := "root@" + m3.IP.String()
	start := time.Now()
	var reset client.HostOutcome
	// m3 holds the volume the rm step made: its name is typed.
	op.json(t, &reset, "machine", "reset", "m3", "--confirm", "m3", "-y")
	if reset.Cluster != client.ClusterLeft {
		t.Fatalf("reset: %+v", reset)
	}
	twoLeft(ctx, t, l, reset.MachineID)
	// The Machine tears down after it answered the reset.
	eventually(t, 30*time.Second, "m3 uninitialized", func() error {
		in, err := inspectLocal(ctx, l, "m3")
		if err == nil && in.Phase != "uninitialized" {
			err = fmt.Errorf("m3 is %s", in.Phase)
		}
		return err
	})
	if out, err := l.Exec(ctx, "m3", "systemctl", "is-active", "ployz.service"); err != nil || out != "active" {
		t.Fatalf("ployzd after reset: %q, %v", out, err)
	}
	t.Logf("reset m3 in %s", time.Since(start).Round(100*time.Millisecond))

	var added rpc.Inspection
	op.json(t, &added, "machine", "add", dest, "--name", "m3", "--no-catch-up")
	if added.Phase != "participating" {
		t.Fatalf("add m3 back: %+v", added)
	}

	start = time.Now()
	var dry client.HostOutcome
	op.json(t, &dry, "machine", "uninstall", "m3", "--dry-run")
	if dry.Cluster != client.ClusterWouldLeft || footprint.Count(dry.Items, footprint.WouldRemove) == 0 || footprint.Count(dry.Items, footprint.Removed) != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	// Reached through the context's ssh:// connection `machine add` saved.
	var un client.HostOutcome
	op.json(t, &un, "machine", "uninstall", "m3", "--confirm", "m3", "-y")
	if un.Cluster != client.ClusterLeft || un.Failed != 0 || un.Removed == 0 {
		t.Fatalf("uninstall: %+v", un)
	}
	t.Logf("uninstalled m3 in %s: %d removed, %d kept", time.Since(start).Round(100*time.Millisecond), un.Removed, un.Kept)
	// The probes see the real thing: the dry run found what every lab
	// Machine has. (The uninstall itself may find some already gone: the
	// reset of the leave removes the mesh link and chains, stopping the
	// units the bridge and the WireGuard socket.)
	found := map[string]footprint.State{}
	for _, r := range dry.Items {
		found[r.Name] = r.State
	}
	for _, name := range []string{"ployz* units", "filter PLOYZ-INPUT", footprint.MeshLink, footprint.BridgeLink,
		footprint.UnitDir + "/ployz*.service", footprint.BinDir + "/ployzd", footprint.DataDir, footprint.RunDir} {
		if found[name] != footprint.WouldRemove {
			t.Errorf("dry run: %s is %s, want would-remove", name, found[name])
		}
	}
	if !un.ConnectionRemoved {
		t.Error("the context's connection to m3 stayed")
	}
	sh := func(ctx context.Context, cmd string) (string, error) { return l.Exec(ctx, "m3", "sh", "-c", cmd) }
	if left := footprint.Leftovers(footprint.Survey(ctx, sh), true); len(left) > 0 {
		b, _ := json.Marshal(left)
		t.Fatalf("m3 after uninstall still has: %s", b)
	}
	if _, err := l.Exec(ctx, "m3", "docker", "volume", "inspect", "keep"); err != nil {
		t.Errorf("volume data not kept: %v", err)
	}
	var again client.HostOutcome
	op.json(t, &again, "machine", "uninstall", dest, "-y")
	if !again.Nothing() {
		t.Errorf("second uninstall: %+v", again)
	}
	out := op.must(t, "machine", "uninstall", dest, "-y")
	if !strings.Contains(out, "nothing to remove") {
		t.Errorf("second uninstall says %q", out)
	}
	twoLeft(ctx, t, l, added.ID)
}

// twoLeft waits until m1 and m2 each list two participating Machines,
// and not gone.
func twoLeft(ctx context.Context, t *testing.T, l *lab.Lab, gone string) {
	t.Helper()
	for _, name := range []string{"m1", "m2"} {
		eventually(t, 60*time.Second, name+" lists m1 and m2 only", func() error {
			list, err := lsFrom(ctx, l, name)
			if err != nil {
				return err
			}
			if membership(list, gone) != "absent" || len(list.Machines) != 2 {
				return fmt.Errorf("%d Machines, m3 %s", len(list.Machines), membership(list, gone))
			}
			for _, v := range list.Machines {
				if v.Phase != "participating" {
					return fmt.Errorf("%s is %s", v.Name, v.Phase)
				}
			}
			return nil
		})
	}
}
