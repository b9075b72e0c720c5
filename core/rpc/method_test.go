package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/sdk/store"
)

// untyped lists the commands not yet declared with their types (methods.go),
// each with why. The list only shrinks: declaring one of them fails this
// test until its line here goes, and a new command must be declared.
var untyped = map[string]string{}

func TestEveryCommandIsDeclared(t *testing.T) {
	consts := map[string]string{}
	for name, v := range commandConstants(t) {
		if strings.HasPrefix(name, "Cmd") {
			consts[name] = v
		}
	}
	if len(consts) < 40 {
		t.Fatalf("found %d command constants: the source scan is broken", len(consts))
	}
	for name, cmd := range consts {
		_, declared := Lookup(cmd)
		_, listed := untyped[cmd]
		switch {
		case declared && listed:
			t.Errorf("%s (%s) is declared: remove it from the untyped list", name, cmd)
		case !declared && !listed:
			t.Errorf("%s (%s) is neither declared (methods.go) nor in the untyped list", name, cmd)
		}
	}
	known := map[string]bool{}
	for _, v := range consts {
		known[v] = true
	}
	for cmd := range untyped {
		if !known[cmd] {
			t.Errorf("untyped lists %q, which is no command", cmd)
		}
	}
	for _, d := range Catalog() {
		if !known[d.Name] {
			t.Errorf("declared %q has no Cmd constant", d.Name)
		}
		if d.Capability == "" {
			t.Errorf("declared %q has no capability", d.Name)
		}
	}
}

// TestBindDecodesStrictly: a typed handler ignores unknown fields,
// refuses a malformed one naming it, and answers None as null.
func TestBindDecodesStrictly(t *testing.T) {
	got := ""
	r := Bind(StopContainer, func(_ context.Context, req StopContainerRequest) (ContainerObservation, error) {
		got = req.ID
		return ContainerObservation{ID: req.ID}, nil
	})
	if r.Command != CmdStopContainer || r.Capability != CapStopContainer {
		t.Fatalf("route %s %s", r.Command, r.Capability)
	}
	out, err := r.Handler(context.Background(), json.RawMessage(`{"id":"c1","later_field":true}`))
	if err != nil || got != "c1" || out.(ContainerObservation).ID != "c1" {
		t.Fatalf("tolerant read: %v %q %v", out, got, err)
	}
	_, err = r.Handler(context.Background(), json.RawMessage(`{"id":"c1","grace_period_seconds":"ten"}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Details["field"] != "grace_period_seconds" {
		t.Fatalf("malformed field: %v", err)
	}
	none := Method[None, None]{Name: "test_none"}.Handler(func(context.Context, None) (None, error) { return None{}, nil })
	if out, err := none(context.Background(), nil); out != nil || err != nil {
		t.Fatalf("None answer: %v %v", out, err)
	}
}

// callRecorder is a Caller that keeps what Invoke sent.
type callRecorder struct {
	command string
	payload []byte
	answer  string
}

func (c *callRecorder) Call(_ context.Context, _ Target, command string, payload, out any) error {
	c.command = command
	if payload != nil {
		c.payload, _ = json.Marshal(payload)
	}
	if out != nil {
		return json.Unmarshal([]byte(c.answer), out)
	}
	return nil
}

// TestInvokeWire: a None request goes without a payload, as the untyped
// callers sent it; the answer decodes as the declared type.
func TestInvokeWire(t *testing.T) {
	c := &callRecorder{answer: `{"id":"m1","name":"one","future":1}`}
	in, err := Invoke(context.Background(), c, Target{}, Inspect, None{})
	if err != nil || in.ID != "m1" || c.command != CmdInspect || c.payload != nil {
		t.Fatalf("inspect: %+v %v %q %s", in, err, c.command, c.payload)
	}
	c.answer = `{"id":"x"}`
	if _, err := Invoke(context.Background(), c, Target{}, StopContainer, StopContainerRequest{ID: "x", GracePeriodSeconds: 3}); err != nil {
		t.Fatal(err)
	}
	if string(c.payload) != `{"id":"x","grace_period_seconds":3}` {
		t.Fatalf("payload %s", c.payload)
	}
	if err := InvokeInto(context.Background(), c, Target{}, RemoveContainer, RemoveContainerRequest{ID: "x"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestCatalogTypes(t *testing.T) {
	d, ok := Lookup(CmdCreateContainer)
	if !ok || d.Request != reflect.TypeFor[CreateContainerRequest]() || d.Response != reflect.TypeFor[ContainerObservation]() {
		t.Fatalf("create_container: %+v", d)
	}
}

// TestAnswerTypesKeepTheMapsWire: remove_container, forget_machine,
// remove_volume and publish_machine answered maps before they had types;
// the types encode the same JSON.
func TestAnswerTypesKeepTheMapsWire(t *testing.T) {
	pins := &trust.Pins{Strict: true}
	for _, c := range []struct {
		typed any
		old   any
	}{
		{MachinePublished{StoreVersions: map[string]int64{"s": 3}, ClusterSecret: "c"},
			map[string]any{"store_versions": map[string]int64{"s": 3}, "cluster_secret": "c"}},
		{MachinePublished{StoreVersions: map[string]int64{}, ClusterSecret: "c", TrustedMachines: pins},
			map[string]any{"store_versions": map[string]int64{}, "cluster_secret": "c", "trusted_machines": *pins, "endorsement": (*store.Endorsement)(nil)}},
		{MachinePublished{ClusterSecret: "c", TrustedMachines: pins, Endorsement: &store.Endorsement{By: "m1"}},
			map[string]any{"store_versions": map[string]int64(nil), "cluster_secret": "c", "trusted_machines": *pins, "endorsement": &store.Endorsement{By: "m1"}}},
		{ContainerRemoved{Removed: "c1"}, map[string]string{"removed": "c1"}},
		{MachineForgotten{Forgotten: "m1"}, map[string]string{"forgotten": "m1"}},
		{VolumeRemoved{MachineID: "m1", Removed: "db"}, map[string]string{"removed": "db", "machine_id": "m1"}},
	} {
		a, _ := json.Marshal(c.typed)
		b, _ := json.Marshal(c.old)
		if string(a) != string(b) {
			t.Errorf("%T encodes %s, the untyped answer was %s", c.typed, a, b)
		}
	}
}

var updateCatalog = flag.Bool("update", false, "rewrite testdata/methods.golden")

// TestCatalogGolden records every declared command with its capability
// and types, so a review sees a command's request or answer type change
// (which may move its JSON) as a diff of testdata/methods.golden.
func TestCatalogGolden(t *testing.T) {
	var b strings.Builder
	for _, d := range Catalog() {
		arrow := "->"
		if d.Stream {
			arrow = "=> stream of"
		}
		fmt.Fprintf(&b, "%s %s %v %s %v\n", d.Name, d.Capability, d.Request, arrow, d.Response)
	}
	path := filepath.Join("testdata", "methods.golden")
	if *updateCatalog {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("the catalog moved (go test ./core/rpc -run TestCatalogGolden -update to accept):\n%s", b.String())
	}
}
