package rpc

import (
	"strings"
	"testing"
)

func TestMoveServingPointerRequestValidate(t *testing.T) {
	ok := MoveServingPointerRequest{Service: "hello-prod/web", Containers: []ServingContainer{{ID: "c1", MachineID: "m1"}}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := map[string]MoveServingPointerRequest{
		`field "service"`:            {Service: "web"},
		`field "service": "a/b/c"`:   {Service: "a/b/c"},
		`field "containers[0].id"`:   {Service: "n/s", Containers: []ServingContainer{{MachineID: "m1"}}},
		`"containers[1].machine_id"`: {Service: "n/s", Containers: []ServingContainer{{ID: "a", MachineID: "m"}, {ID: "b"}}},
		`named twice`:                {Service: "n/s", Containers: []ServingContainer{{ID: "a", MachineID: "m"}, {ID: "a", MachineID: "m"}}},
		`field "delete"`:             {Service: "n/s", Delete: true, Containers: []ServingContainer{{ID: "a", MachineID: "m"}}},
	}
	for want, req := range bad {
		err := req.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %s", req, err, want)
		}
	}
}

func TestServingPending(t *testing.T) {
	s := ServiceServing{Pointer: "p2", Acks: []ServingAck{
		{Machine: "m1", Membership: "up", Acked: "p2"},
		{Machine: "m2", Membership: "suspect", Acked: "p1"},
		{Machine: "m3", Membership: "down"},
	}}
	if got := strings.Join(s.Pending(), ","); got != "m2 (suspect)" {
		t.Fatalf("pending %q", got)
	}
}
