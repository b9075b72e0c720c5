package deploy

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Plan scale (issue 49): what `ployz deploy --dry-run` computes for 200
// Services × 10 replicas against 100 Machines' observations.
const (
	scaleServices = 200
	scaleReplicas = 10
	scaleMachines = 100
)

// scaleApp is scaleServices replicated Services, each its own image.
func scaleApp() App {
	a := app()
	for i := 0; i < scaleServices; i++ {
		s := svc(fmt.Sprintf("svc%03d", i), scaleReplicas)
		s.Spec.Image = fmt.Sprintf("registry.example/team/svc%03d:1.0.%d", i, i)
		s.Spec.Env = map[string]string{"PORT": "8080", "LOG_LEVEL": "info", "SERVICE": s.Name}
		s.Spec.Ports = []rpc.PortSpec{{ContainerPort: 8080, Protocol: "tcp"}}
		a.Services = append(a.Services, s)
	}
	return a
}

// scaleSnapshot is scaleMachines observed Machines holding every image,
// running the Containers of plan p (none when p is nil).
func scaleSnapshot(a App, p *Plan) Snapshot {
	var images []string
	for _, s := range a.Services {
		images = append(images, s.Spec.Image)
	}
	ms := make([]MachineState, scaleMachines)
	index := map[string]int{}
	for i := range ms {
		ms[i] = MachineState{ID: fmt.Sprintf("id-m%03d", i), Name: fmt.Sprintf("m%03d", i), Observed: true, ImagesKnown: true, Images: images,
			Labels: map[string]string{"region": []string{"eu", "us"}[i%2]}, Capabilities: []string{rpc.CapContainerHost}}
		index[ms[i].ID] = i
	}
	if p != nil {
		for k, r := range p.Rows {
			if r.Op != OpCreate {
				continue
			}
			m := &ms[index[r.MachineID]]
			m.Containers = append(m.Containers, rpc.ContainerObservation{
				ID: fmt.Sprintf("c%05d", k), Name: r.NewName, MachineID: r.MachineID, Namespace: r.Spec.Namespace, Service: r.Service,
				ServiceID: r.Spec.ServiceID, SpecHash: r.Spec.SpecHash, Image: r.Spec.Image, State: "running", Ready: true, CreatedAt: time.Now().Unix(),
				IP: fmt.Sprintf("10.210.%d.%d", k/250, k%250+2), Spec: r.Spec, Labels: map[string]string{rpc.LabelKind: r.Spec.Kind},
			})
		}
	}
	return Snapshot{Machines: ms}
}

// BenchmarkPlanScale plans 200 Services × 10 replicas on 100 Machines:
// a first deploy (2,000 creates) and the same deploy once those 2,000
// Containers run (2,000 unchanged rows). It reports the time per plan,
// the memory allocated per plan (B/op), the heap the plan holds and the
// size of its --json rendering. The goal (issue 49) is under 1 s.
func BenchmarkPlanScale(b *testing.B) {
	a := scaleApp()
	first, err := MakePlan(a, scaleSnapshot(a, nil), PlanOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		snap Snapshot
		op   string
	}{
		{"first", scaleSnapshot(a, nil), OpCreate},
		{"redeploy", scaleSnapshot(a, &first), OpUnchanged},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var p Plan
			for i := 0; i < b.N; i++ {
				if p, err = MakePlan(a, tc.snap, PlanOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			checkScalePlan(b, p, tc.op)
			b.ReportMetric(float64(heldBy(func() any { p, _ := MakePlan(a, tc.snap, PlanOptions{}); return p }))/(1<<20), "held-MB")
			js, _ := json.Marshal(p)
			b.ReportMetric(float64(len(js))/(1<<20), "json-MB")
		})
	}
}

// checkScalePlan fails unless every one of the 2,000 rows is op and the
// replicas are spread evenly (20 per Machine).
func checkScalePlan(b *testing.B, p Plan, op string) {
	b.Helper()
	per := map[string]int{}
	for _, r := range p.Rows {
		if r.Op != op {
			b.Fatalf("row %s/%s on %s is %s (%s), want %s", r.Service, r.NewName, r.Machine, r.Op, r.Reason, op)
		}
		per[r.MachineID]++
	}
	if len(p.Rows) != scaleServices*scaleReplicas {
		b.Fatalf("plan has %d rows, want %d", len(p.Rows), scaleServices*scaleReplicas)
	}
	want := scaleServices * scaleReplicas / scaleMachines
	for m, n := range per {
		if n != want {
			b.Fatalf("Machine %s gets %d Containers, want %d (even spread)", m, n, want)
		}
	}
}

// heldBy is the heap growth that stays reachable while f's result lives.
func heldBy(f func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}
