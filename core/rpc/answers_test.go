package rpc

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestAnswersDecodesEveryMachine(t *testing.T) {
	type ans struct{ N int }
	fr := FanoutResult{
		Results: []TargetResult{
			{MachineID: "id-c", MachineName: "c", Payload: json.RawMessage(`{"N":3}`)},
			{MachineID: "id-a", MachineName: "a", Error: &Error{Code: "unavailable", Message: "plugin down", Details: map[string]any{"capability": "x"}}},
			{MachineID: "id-b", Payload: json.RawMessage(`{"N":"three"}`)},
		},
		Omitted: []Omission{{MachineID: "id-d", MachineName: "d", Reason: "down since 10:00"}},
	}
	got := Answers[ans](fr, "count")
	if len(got) != 4 {
		t.Fatalf("%d answers, want 4 (every result and omission): %+v", len(got), got)
	}
	// Sorted by Machine: "a", "c", "d", then "id-b" (nameless, named by id).
	if got[0].Machine != "a" || got[1].Machine != "c" || got[2].Machine != "d" || got[3].Machine != "id-b" {
		t.Fatalf("order %q %q %q %q", got[0].Machine, got[1].Machine, got[2].Machine, got[3].Machine)
	}
	if a := got[0]; a.Value != nil || a.Err == nil || a.Err.Details["capability"] != "x" || !strings.Contains(a.Error, "plugin down") {
		t.Errorf("call error: %+v", a)
	}
	if c := got[1]; c.Value == nil || c.Value.N != 3 || c.Error != "" || c.MachineID != "id-c" {
		t.Errorf("answer: %+v", c)
	}
	if d := got[2]; d.Value != nil || d.Err != nil || d.Error != "down since 10:00" {
		t.Errorf("omitted: %+v", d)
	}
	if b := got[3]; b.Value != nil || !strings.HasPrefix(b.Error, "malformed count answer: ") {
		t.Errorf("malformed payload: %+v", b)
	}
}
