package deploy

import (
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestNewNamesUnique: a suffix already taken, by a Container on an
// observed Machine or by an earlier row of the plan, is drawn again, so
// two replicas never share a name (Docker refuses the second on one
// Machine).
func TestNewNamesUnique(t *testing.T) {
	draws := []string{"cccc", "aaaa", "aaaa", "cccc", "aaaa", "bbbb", "dddd"}
	old := nameSuffix
	t.Cleanup(func() { nameSuffix = old })
	nameSuffix = func() string {
		s := draws[0]
		draws = draws[1:]
		return s
	}
	snap := fanoutSnapshot(3)
	snap.Machines[0].Containers = []rpc.ContainerObservation{{ID: "x1", Name: ns + "-web-cccc", MachineID: "id-m000", Namespace: ns, Service: "other", State: "exited"}}
	a := fanoutApp(0, 0)
	a.Services = append(a.Services, svc("web", 3))
	p, err := MakePlan(a, snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range p.Rows {
		if r.Op != OpCreate {
			continue
		}
		if seen[r.NewName] {
			t.Fatalf("name %s given twice: %+v", r.NewName, p.Rows)
		}
		seen[r.NewName] = true
	}
	for _, want := range []string{ns + "-web-aaaa", ns + "-web-bbbb", ns + "-web-dddd"} {
		if !seen[want] {
			t.Errorf("names %v, want %s (cccc is taken, aaaa given once)", seen, want)
		}
	}
}
