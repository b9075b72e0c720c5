package client

import (
	"context"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/footprint"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/internal/fakehost"
)

// onHost is a planned uninstall of a fake host.
func onHost(h *fakehost.Host, leave *MachineRemoval) *HostUninstall {
	return &HostUninstall{Host: "ssh://root@fake", Leave: leave, shell: func(context.Context) (footprint.Shell, func(), error) {
		return h.Shell, func() {}, nil
	}}
}

// TestResetPlans: the entry is refused while other Machines exist; the
// only Machine resets itself and the Cluster ends.
func TestResetPlans(t *testing.T) {
	ctx := context.Background()
	_, s := newFake(t, "m1", "m2")
	if _, err := s.PlanResetMachine(ctx, "m1"); err == nil || !strings.Contains(err.Error(), "is the Entry Machine of this connection") {
		t.Fatalf("reset of the entry: %v", err)
	}
	mr, err := s.PlanResetMachine(ctx, "m2")
	if err != nil || mr.Last {
		t.Fatalf("plan m2: %+v, %v", mr, err)
	}
	fc, s := newFake(t, "solo")
	mr, err = s.PlanResetMachine(ctx, "solo")
	if err != nil || !mr.Last {
		t.Fatalf("plan the only Machine: %+v, %v", mr, err)
	}
	if q, typed := mr.Question(); typed || !strings.Contains(q, "ends the Cluster") {
		t.Errorf("question %q", q)
	}
	o, err := s.Leave(ctx, mr)
	if err != nil || o.Cluster != ClusterEnded || !fc.Machine("solo").WasReset {
		t.Fatalf("leave of the only Machine: %+v, %v", o, err)
	}
}

// TestUninstallLeavesThenRemoves: the Machine leaves the Cluster first
// (reset and forgotten), then every footprint item goes, volumes kept;
// a second uninstall finds nothing.
func TestUninstallLeavesThenRemoves(t *testing.T) {
	ctx := context.Background()
	fc, s := newFake(t, "m1", "m2", "m3")
	m3 := fc.Machine("m3")
	mr, err := s.PlanResetMachine(ctx, "m3")
	if err != nil {
		t.Fatal(err)
	}
	// The context's connection to the host goes with it; the others stay.
	conns := []operator.Connection{{URL: "ssh://root@m1"}, {URL: "ssh://root@fake"}}
	if err := s.st.SaveContext(operator.Context{Name: "lab", Connections: conns}); err != nil {
		t.Fatal(err)
	}
	h := fakehost.Installed()
	o, err := s.Uninstall(ctx, onHost(h, mr), footprint.Options{})
	if c, _ := s.st.Context("lab"); !o.ConnectionRemoved || len(c.Connections) != 1 || c.Connections[0].URL != "ssh://root@m1" {
		t.Errorf("connections after uninstall: %+v (removed %t)", c.Connections, o.ConnectionRemoved)
	}
	if err != nil || o.Cluster != ClusterLeft || !m3.WasReset {
		t.Fatalf("uninstall: %+v, %v", o, err)
	}
	if o.Removed != len(footprint.Items())-1 || o.Kept != 1 || o.Failed != 0 || o.Nothing() {
		t.Fatalf("counts: removed %d kept %d failed %d", o.Removed, o.Kept, o.Failed)
	}
	if _, err := s.PlanResetMachine(ctx, "m3"); err == nil {
		t.Fatal("m3 still listed after uninstall")
	}
	again, err := s.Uninstall(ctx, onHost(fakehost.Bare(), nil), footprint.Options{})
	if err != nil || !again.Nothing() || again.Cluster != ClusterNotMember {
		t.Fatalf("second uninstall: %+v, %v", again, err)
	}
}

// TestUninstallPartial: a failed item makes the outcome partial and is
// named; a dry run changes neither the Cluster nor the host.
func TestUninstallPartial(t *testing.T) {
	ctx := context.Background()
	fc, s := newFake(t, "m1", "m2")
	m2 := fc.Machine("m2")
	mr, err := s.PlanResetMachine(ctx, "m2")
	if err != nil {
		t.Fatal(err)
	}
	h := fakehost.Installed()
	dry, err := s.Uninstall(ctx, onHost(h, mr), footprint.Options{DryRun: true})
	if err != nil || dry.Cluster != ClusterWouldLeft || m2.WasReset || len(h.Ran) != 0 {
		t.Fatalf("dry run: %+v, %v, ran %v", dry, err, h.Ran)
	}
	h.Refuse[footprint.MeshLink] = true
	o, err := s.Uninstall(ctx, onHost(h, mr), footprint.Options{})
	if !IsPartial(err) || o.Failed != 1 || !strings.Contains(err.Error(), "1 of the footprint's items failed") {
		t.Fatalf("partial: %+v, %v", o, err)
	}
}

// TestPlanUninstallNeedsAHost: a Machine no ssh:// connection reaches
// needs --ssh, and a host target takes no --ssh.
func TestPlanUninstallNeedsAHost(t *testing.T) {
	ctx := context.Background()
	_, s := newFake(t, "m1", "m2")
	if _, err := s.PlanUninstall(ctx, "m2", ""); err == nil || !strings.Contains(err.Error(), "pass --ssh") {
		t.Fatalf("no connection: %v", err)
	}
	if _, err := s.PlanUninstall(ctx, "root@host", "root@other"); err == nil || !strings.Contains(err.Error(), "is a host already") {
		t.Fatalf("host and --ssh: %v", err)
	}
	if _, err := s.PlanUninstall(ctx, "nosuch", ""); err == nil {
		t.Fatal("unknown Machine accepted")
	}
}
