package serving

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/store"
)

// storeFeature is the feature on a participating Machine self over a
// real store node of its own (no mesh, no plugins).
func storeFeature(t testing.TB, self string) (*Feature, *store.Client) {
	t.Helper()
	_, st := featuretest.Store(t, self)
	h := newHost(t, machine.Record{ID: self, Name: "self", Phase: machine.Participating})
	h.st = st
	return h.feature(), st
}

// TestMoveServingPointerAndStatus moves a pointer through the handler:
// each Container is named with the image and deployment its owner's row
// reports (not what the caller claims), a Container without a row from
// its Machine is reported unseen, serving_status joins the pointer with
// every participating Machine's ack (those accepting ingress), and a
// delete removes it.
func TestMoveServingPointerAndStatus(t *testing.T) {
	ctx := context.Background()
	f, st := storeFeature(t, "m-self")
	featuretest.PutMachine(t, st, "m-self", "self", machine.Participating)
	featuretest.PutMachine(t, st, "m-two", "two", machine.Participating)
	featuretest.PutMachine(t, st, "m-new", "new", machine.Joining) // not participating: owes no ack
	// Its own row says it does not accept ingress: no proxy runs there,
	// so it owes no ack either.
	if _, err := st.Machines().Put(ctx, store.Row[store.MachineBody]{Key: "m-worker", Owner: "m-worker",
		Body: store.MachineBody{Name: "worker", Phase: string(machine.Participating), Labels: map[string]string{rpc.MachineLabelAccepts: "services,builds"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Containers().Put(ctx, store.Row[store.ContainerBody]{Key: "c1", Owner: "m-two",
		Body: store.ContainerBody{Service: "web", Namespace: "hello-prod", ImageID: "sha256:row", Deployment: "d-row", State: "running"}}); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	out, err := featuretest.Call(t, featuretest.Typed(f.moveServingPointer), rpc.MoveServingPointerRequest{Service: "Hello-Prod/Web", Deployment: "d2", Containers: []rpc.ServingContainer{
		{ID: "c1", MachineID: "m-two", ImageID: "sha256:claimed", Deployment: "d-claimed"},
		{ID: "c9", MachineID: "m-two", ImageID: "sha256:nine"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	moved := out.(rpc.ServingPointerMoved)
	if moved.ID == "" || !slices.Equal(moved.Unseen, []string{"c9"}) || len(moved.Containers) != 2 {
		t.Fatalf("moved %+v", moved)
	}
	if c := moved.Containers[0]; c.ImageID != "sha256:row" || c.Deployment != "d-row" {
		t.Errorf("c1 named as %+v, want the row's image and deployment", c)
	}
	if waited := time.Since(start); waited < pointerRowWait {
		t.Errorf("gave up on c9's row after %s, before %s", waited, pointerRowWait)
	}
	row, ok, err := st.Serving().Get(ctx, "hello-prod/web")
	if err != nil || !ok || row.Body.ID != moved.ID || row.Owner != "m-self" || row.Body.Deployment != "d2" {
		t.Fatalf("pointer row %+v %v %v", row, ok, err)
	}

	featuretest.PutAck(t, st, "m-two", "hello-prod/web", moved.ID)
	featuretest.PutAck(t, st, "m-self", "hello-prod/web", "an-older-pointer")
	sout, err := featuretest.Call(t, featuretest.Typed(f.servingStatus), rpc.ServingStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	status := sout.(rpc.ServingStatus)
	if status.ObserverID != "m-self" || len(status.Services) != 1 {
		t.Fatalf("status %+v", status)
	}
	s := status.Services[0]
	if s.Service != "hello-prod/web" || s.Pointer != moved.ID || s.Deployment != "d2" || len(s.Containers) != 2 {
		t.Fatalf("service status %+v", s)
	}
	acks := map[string]rpc.ServingAck{}
	for _, a := range s.Acks {
		acks[a.MachineID] = a
	}
	if len(acks) != 2 || acks["m-two"].Acked != moved.ID || acks["m-self"].Acked != "an-older-pointer" ||
		acks["m-self"].Membership != "up" || acks["m-two"].Membership != "unknown" {
		t.Fatalf("acks %+v, want m-self (up, older pointer) and m-two (unknown membership, current)", s.Acks)
	}
	if p := s.Pending(); !slices.Equal(p, []string{"self (up)"}) {
		t.Errorf("pending %v, want only self", p)
	}

	// wait_pointer answers once the last ack is in, not before.
	go func() {
		time.Sleep(300 * time.Millisecond)
		featuretest.PutAck(t, st, "m-self", "hello-prod/web", moved.ID)
	}()
	start = time.Now()
	sout, err = featuretest.Call(t, featuretest.Typed(f.servingStatus), rpc.ServingStatusRequest{Services: []string{"hello-prod/web"}, WaitPointer: moved.ID, WaitSeconds: 20})
	if err != nil {
		t.Fatal(err)
	}
	if p := sout.(rpc.ServingStatus).Services[0].Pending(); len(p) != 0 || time.Since(start) < 300*time.Millisecond || time.Since(start) > 15*time.Second {
		t.Fatalf("waited status after %s: pending %v", time.Since(start), p)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.servingStatus), rpc.ServingStatusRequest{WaitPointer: moved.ID}); err == nil {
		t.Fatal("wait_pointer without one service accepted")
	}

	if _, err := featuretest.Call(t, featuretest.Typed(f.moveServingPointer), rpc.MoveServingPointerRequest{Service: "hello-prod/web", Delete: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Serving().Get(ctx, "hello-prod/web"); ok || err != nil {
		t.Fatalf("pointer left after delete: %v %v", ok, err)
	}
}

// TestServingHandlersRefuse: bad requests are refused with the field
// named, and a Machine without a store says so instead of guessing.
func TestServingHandlersRefuse(t *testing.T) {
	f, _ := storeFeature(t, "m-self")
	for name, tc := range map[string]struct {
		raw, field string
	}{
		"service type": {`{"service":7}`, "service"},
		"no namespace": {`{"service":"web"}`, `"service"`},
		"empty id":     {`{"service":"a/b","containers":[{"machine_id":"m"}]}`, "containers[0].id"},
		"delete names": {`{"service":"a/b","delete":true,"containers":[{"id":"c","machine_id":"m"}]}`, `"delete"`},
	} {
		_, err := featuretest.Typed(f.moveServingPointer)(context.Background(), json.RawMessage(tc.raw))
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeInvalidArgument || !strings.Contains(e.Message, tc.field) {
			t.Errorf("%s: %v, want invalid_argument naming %s", name, err, tc.field)
		}
	}
	bare := newHost(t, machine.Record{ID: "x", Phase: machine.Uninitialized}).feature()
	if _, err := bare.servingStatus(context.Background(), rpc.ServingStatusRequest{}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("status without a store: %v", err)
	}
}
