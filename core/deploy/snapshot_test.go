package deploy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// observer is a test double of our own contract for Observe: it answers
// list_machines and the list_containers / list_images fan-outs from
// fixed payloads, with one Machine failing and one omitted.
type observer struct{}

func (observer) Call(_ context.Context, _ rpc.Target, cmd string, _, out any) error {
	list := rpc.MachineList{ObserverName: "m1", Machines: []rpc.MachineView{
		{ID: "a", Name: "m1", Labels: map[string]string{"region": "eu"}}, {ID: "b", Name: "m2"}, {ID: "c", Name: "m3"}, {ID: "d", Name: "m4"},
	}}
	b, _ := json.Marshal(list)
	return json.Unmarshal(b, out)
}

func (observer) Fanout(_ context.Context, t rpc.Target, cmd string, _ any) (rpc.FanoutResult, error) {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	if cmd == rpc.CmdListImages {
		return rpc.FanoutResult{Results: []rpc.TargetResult{{MachineID: "a", Payload: raw(rpc.ImageList{Images: []rpc.ImageInfo{{ID: "sha256:1", Tags: []string{"ployz-testapp:latest"}}}})}}}, nil
	}
	return rpc.FanoutResult{
		Results: []rpc.TargetResult{
			{MachineID: "a", Payload: raw(rpc.ContainerList{Volumes: []string{"v"}, Containers: []rpc.ContainerObservation{
				{ID: "1", Labels: map[string]string{rpc.LabelNamespace: ns, rpc.LabelService: "web", rpc.LabelSpecHash: "h"}, State: "running"},
				{ID: "2", Namespace: "other-production", Service: "x"},
			}})},
			{MachineID: "b", Error: &rpc.Error{Code: "unavailable", Message: "docker is down"}},
		},
		Omitted: []rpc.Omission{{MachineID: "c", MachineName: "m3", Reason: "suspect"}},
	}, nil
}

func TestObserveRecordsFailuresAndOmissions(t *testing.T) {
	snap, err := Observe(context.Background(), observer{}, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Complete() || len(snap.Missing) != 3 {
		t.Fatalf("missing = %+v", snap.Missing)
	}
	names := snap.MissingNames()
	for _, want := range []string{"m2 (", "docker is down", "m3 (suspect)", "m4 (no answer in the fan-out)"} {
		if !strings.Contains(names, want) {
			t.Errorf("missing names %q lack %q", names, want)
		}
	}
	m1, _ := snap.Machine("a")
	if !m1.Observed || !m1.ImagesKnown || !HasImage(m1.Images, "ployz-testapp") || m1.Labels["region"] != "eu" || len(m1.Volumes) != 1 {
		t.Fatalf("m1 = %+v", m1)
	}
	if cs := snap.Containers(ns); len(cs) != 1 || cs[0].Service != "web" || cs[0].SpecHash != "h" || cs[0].MachineID != "a" {
		t.Fatalf("containers from labels = %+v", cs)
	}
	if m2, _ := snap.Machine("b"); m2.Observed || m2.ImagesKnown {
		t.Fatalf("failed Machine counted as observed: %+v", m2)
	}
}
