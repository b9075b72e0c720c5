package client

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/enroll"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/fakecluster"
)

// enrollCluster is a fake Cluster (m1, m2 on 10.210.1.0/24 and
// .2.0/24) whose entry answers inspect and publish_machine; publish
// fails while crash is set, as an operator's CLI killed between
// allocating and publishing leaves it. published are the subnets
// published, by Machine id.
type enrollCluster struct {
	*fakecluster.Cluster
	crash     bool
	published map[string]string
}

func newEnrollCluster(t *testing.T) *enrollCluster {
	ec := &enrollCluster{published: map[string]string{}}
	ec.Cluster = fakecluster.NewWith(t, fakecluster.Options{Routes: func(fc *fakecluster.Cluster, srv *rpc.Server, m *fakecluster.Machine) {
		fakecluster.HandleMethod(fc, srv, m, rpc.Inspect, func(rpc.None) (rpc.Inspection, error) {
			return rpc.Inspection{ID: m.ID(), Name: m.Name(), Phase: machine.Participating, Network: "10.210.0.0/16"}, nil
		})
		fc.Handle(srv, m, rpc.CmdPublishMachine, func(raw json.RawMessage) (any, error) {
			var req rpc.PublishMachineRequest
			if err := rpc.Decode(rpc.CmdPublishMachine, raw, &req); err != nil {
				return nil, err
			}
			if ec.crash {
				return nil, rpc.Errorf(rpc.CodeUnavailable, "the operator's CLI was killed")
			}
			ec.published[req.ID] = req.Subnet
			return struct{}{}, nil
		})
	}}, "m1", "m2")
	return ec
}

// home is one operator's computer: its own operator store, with the
// context "lab", and a Session on the Cluster's entry.
func (ec *enrollCluster) home(t *testing.T) *Session {
	st, ent := ec.NewSession()
	if err := st.SaveContext(operator.Context{Name: "lab", Connections: []operator.Connection{{URL: ec.EntryURL()}}}); err != nil {
		t.Fatal(err)
	}
	return New(st, ent, "lab")
}

// newTarget serves a Machine not yet in any Cluster (uninitialized)
// that joins when asked; it answers its unix:// address.
func newTarget(t *testing.T, id string) string {
	srv := rpc.NewServer(rpc.Options{Local: func() (string, string) { return id, id }})
	srv.Handle(rpc.Bind(rpc.Inspect, func(context.Context, rpc.None) (rpc.Inspection, error) {
		return rpc.Inspection{ID: id, Hostname: id, Phase: machine.Uninitialized}, nil
	}))
	srv.Handle(rpc.Bind(rpc.Join, func(context.Context, rpc.JoinRequest) (rpc.Inspection, error) {
		return rpc.Inspection{ID: id, Name: id, Phase: machine.Participating}, nil
	}))
	addr := filepath.Join(t.TempDir(), id+".sock")
	lis, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(lis) // ends with Stop
	t.Cleanup(g.Stop)
	return "unix://" + addr
}

// TestTwoHomesAddMachinesDistinctSubnets: operator A's `machine add` of
// m3 records 10.210.0.0/24 (m1 and m2 have .1 and .2) in the Cluster and
// dies before publishing; operator B, on another computer with an empty
// operator store, adds m4 and gets 10.210.3.0/24, not A's; A's retry of
// m3 resumes its subnet.
// Both end joined in the Cluster's history and neither computer's
// store holds any of it.
func TestTwoHomesAddMachinesDistinctSubnets(t *testing.T) {
	ec := newEnrollCluster(t)
	ctx := context.Background()
	a, b := ec.home(t), ec.home(t)
	m3, m4 := newTarget(t, "id-m3"), newTarget(t, "id-m4")

	ec.crash = true
	if _, err := a.AddMachine(ctx, Enrollment{Dest: m3}); err == nil || !strings.Contains(err.Error(), "publish") {
		t.Fatalf("A's add through a crash: %v", err)
	}
	ec.crash = false
	hist := ec.Allocations()
	if len(hist) != 1 || hist[0].MachineID != "id-m3" || hist[0].Subnet != "10.210.0.0/24" || hist[0].State != "allocated" {
		t.Fatalf("after A's crash the Cluster holds %+v", hist)
	}
	if in, err := b.AddMachine(ctx, Enrollment{Dest: m4}); err != nil || in.Phase != machine.Participating {
		t.Fatalf("B's add: %+v, %v", in, err)
	}
	if _, err := a.AddMachine(ctx, Enrollment{Dest: m3}); err != nil {
		t.Fatalf("A's retry: %v", err)
	}
	if ec.published["id-m4"] != "10.210.3.0/24" || ec.published["id-m3"] != "10.210.0.0/24" {
		t.Fatalf("published %v: want m3 on .0 (resumed) and m4 on .3 (past m1's, m2's and m3's)", ec.published)
	}
	got := map[string]string{}
	for _, h := range ec.Allocations() {
		got[h.MachineID] = h.Subnet + " " + h.State
	}
	if got["id-m3"] != "10.210.0.0/24 joined" || got["id-m4"] != "10.210.3.0/24 joined" || len(got) != 2 {
		t.Fatalf("history %v", got)
	}
	for name, s := range map[string]*Session{"A": a, "B": b} {
		if local, _ := s.st.Allocations("lab"); len(local) != 0 {
			t.Errorf("%s's computer keeps %+v: the Cluster answers", name, local)
		}
		if hist, err := s.Allocations(ctx); err != nil || len(hist) != 2 {
			t.Errorf("%s reads the history %+v, %v", name, hist, err)
		}
	}
}

// TestAllocationsFallBackForAnOlderEntry: an entry that keeps no
// allocation history leaves it in this computer's store, as before.
func TestAllocationsFallBackForAnOlderEntry(t *testing.T) {
	fc := fakecluster.NewWith(t, fakecluster.Options{Unsupported: []string{rpc.CmdListAllocations, rpc.CmdPutAllocation}}, "m1")
	s := New(fc.Store, fc.Entry, "lab")
	var al enroll.Allocations = s.allocations()
	net16 := netip.MustParsePrefix("10.210.0.0/16")
	subnet, err := al.Allocate(context.Background(), "id-m3", "m3", net16, []netip.Prefix{netip.MustParsePrefix("10.210.0.0/24")})
	if err != nil || subnet.String() != "10.210.1.0/24" {
		t.Fatalf("allocate: %v %v", subnet, err)
	}
	if err := al.SetState(context.Background(), "id-m3", "m3", subnet, "joined"); err != nil {
		t.Fatal(err)
	}
	local, err := fc.Store.Allocations("lab")
	if err != nil || len(local) != 1 || local[0].State != "joined" || local[0].Subnet != subnet {
		t.Fatalf("local history %+v %v", local, err)
	}
	if len(fc.Allocations()) != 0 {
		t.Fatal("the older entry's Cluster was written")
	}
}

// TestFoundingAllocation: founding a Cluster chooses the lowest subnet
// and records it once the founder is initialized, in the new Cluster,
// or, founded by an older release, in this computer's store.
func TestFoundingAllocation(t *testing.T) {
	net16 := netip.MustParsePrefix("10.210.0.0/16")
	for _, older := range []bool{false, true} {
		var o fakecluster.Options
		if older {
			o.Unsupported = []string{rpc.CmdListAllocations, rpc.CmdPutAllocation}
		}
		fc := fakecluster.NewWith(t, o, "m1")
		al := New(fc.Store, fc.Entry, "lab").allocations()
		al.founding = true
		ctx := context.Background()
		subnet, err := al.Allocate(ctx, "id-m1", "m1", net16, nil)
		if err != nil || subnet.String() != "10.210.0.0/24" {
			t.Fatalf("older %v: founding subnet %v, %v", older, subnet, err)
		}
		if len(fc.Allocations()) != 0 {
			t.Fatalf("older %v: recorded before the founder was initialized", older)
		}
		if err := al.SetState(ctx, "id-m1", "m1", subnet, "joined"); err != nil {
			t.Fatal(err)
		}
		local, _ := fc.Store.Allocations("lab")
		cluster := fc.Allocations()
		if older && (len(local) != 1 || local[0].Subnet != subnet || local[0].State != "joined" || len(cluster) != 0) {
			t.Fatalf("older entry: local %+v, Cluster %+v", local, cluster)
		}
		if !older && (len(local) != 0 || len(cluster) != 1 || cluster[0].Subnet != subnet.String() || cluster[0].State != "joined") {
			t.Fatalf("local %+v, Cluster %+v", local, cluster)
		}
	}
}
