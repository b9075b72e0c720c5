package rpc

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRunPayloadsFixture pins run_container's request, its events and a
// client's control events, and list_containers' one_offs: each field
// reads from its JSON name, a later field is ignored, and re-encoding
// writes the keys the fixture holds.
func TestRunPayloadsFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Run      RunContainerRequest   `json:"run_container"`
		Detached RunContainerRequest   `json:"run_container_detached"`
		Started  RunEvent              `json:"started"`
		Exited   RunEvent              `json:"exited"`
		Signal   RunControl            `json:"signal"`
		Resize   RunControl            `json:"resize"`
		List     ListContainersRequest `json:"list_one_offs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Run
	if r.Name != "hello-default-web-run-1a2b" || r.Spec.Kind != KindRun || r.Spec.Command[1] != "3" || len(r.Files) != 1 ||
		!r.Keep || !r.TTY || !r.Stdin || r.Detach || r.Width != 120 || r.Height != 40 {
		t.Fatalf("run_container: %+v", r)
	}
	if !doc.Detached.Detach || doc.Detached.Keep || doc.Detached.TTY {
		t.Fatalf("detached: %+v", doc.Detached)
	}
	if s := doc.Started.Started; s == nil || s.ID != "0123456789abcdef" || s.MachineID != "m1id" || doc.Started.Exited != nil {
		t.Fatalf("started: %+v", doc.Started)
	}
	if e := doc.Exited.Exited; e == nil || e.ExitCode != 3 || !e.OOMKilled || !e.Removed || !strings.Contains(e.Note, "timeout") {
		t.Fatalf("exited: %+v", doc.Exited)
	}
	if doc.Signal != (RunControl{Signal: "SIGINT"}) || doc.Resize != (RunControl{Width: 100, Height: 30}) {
		t.Fatalf("controls: %+v %+v", doc.Signal, doc.Resize)
	}
	if doc.List != (ListContainersRequest{Namespace: "hello-default", OneOffs: true}) {
		t.Fatalf("list: %+v", doc.List)
	}
	reencodes(t, b, map[string]any{"run_container": doc.Run, "run_container_detached": doc.Detached, "started": doc.Started,
		"exited": doc.Exited, "signal": doc.Signal, "resize": doc.Resize, "list_one_offs": doc.List})
}

// TestRunValidate: run options that contradict each other, and control
// events outside what a run takes, are refused naming the field.
func TestRunValidate(t *testing.T) {
	spec := ContainerSpec{Kind: KindRun}
	for _, c := range []struct {
		req   RunContainerRequest
		field string
	}{
		{RunContainerRequest{Detach: true, TTY: true}, "tty"},
		{RunContainerRequest{Detach: true, Stdin: true}, "stdin"},
		{RunContainerRequest{Width: 80, Height: 24}, "width"},
		{RunContainerRequest{CreateContainerRequest: CreateContainerRequest{Spec: ContainerSpec{Kind: KindHook}}}, "spec.kind"},
	} {
		err := c.req.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Details["field"] != c.field {
			t.Errorf("%+v: %v, want a refusal naming %s", c.req, err, c.field)
		}
	}
	for _, ok := range []RunContainerRequest{{}, {Detach: true, Keep: true}, {TTY: true, Stdin: true, Width: 80, Height: 24},
		{CreateContainerRequest: CreateContainerRequest{Spec: spec}}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	for _, bad := range []RunControl{{Signal: "SIGKILL"}, {Signal: "INT"}, {Width: 80}, {Height: 24}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("control %+v accepted", bad)
		}
	}
	for _, sig := range RunSignals {
		if err := (RunControl{Signal: sig}).Validate(); err != nil {
			t.Errorf("%s: %v", sig, err)
		}
	}
}

// TestIsReplica: only a service Container (or one from before kinds) is
// a replica.
func TestIsReplica(t *testing.T) {
	for kind, want := range map[string]bool{"": true, KindService: true, KindHook: false, KindRun: false} {
		if got := IsReplica(map[string]string{LabelKind: kind}); got != want {
			t.Errorf("kind %q: replica %v, want %v", kind, got, want)
		}
	}
	if !IsReplica(nil) {
		t.Error("no labels: not a replica")
	}
}

// FuzzRunControl decodes arbitrary bytes as a run's control event, as the
// daemon does with each client event. Properties: no panic; a refusal
// names a field of RunControl and starts with it; an accepted signal is
// one of RunSignals and an accepted size has both sides.
func FuzzRunControl(f *testing.F) {
	f.Add([]byte(`{"signal":"SIGINT"}`))
	f.Add([]byte(`{"width":120,"height":40}`))
	f.Add([]byte(`{"signal":"SIGKILL","width":1}`))
	f.Add([]byte(`{"width":70000}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c RunControl
		if json.Unmarshal(b, &c) != nil {
			return
		}
		err := c.Validate()
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument {
				t.Fatalf("refusal %#v is not an invalid_argument *Error", err)
			}
			field, _ := e.Details["field"].(string)
			if !jsonNames(reflect.TypeOf(c))[field] || !strings.HasPrefix(e.Message, field+": ") {
				t.Fatalf("refusal %v does not name a field of RunControl", err)
			}
			return
		}
		if c.Signal != "" && !slices.Contains(RunSignals, c.Signal) || (c.Width == 0) != (c.Height == 0) {
			t.Fatalf("accepted %+v", c)
		}
	})
}
