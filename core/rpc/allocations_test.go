package rpc

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/store"
)

// TestAllocationPayloadFixtures pins put_allocation's, list_allocations',
// mark_removal's, clear_removal's and list_removals' JSON.
func TestAllocationPayloadFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/allocations.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Put   PutAllocationRequest `json:"put_allocation"`
		List  Allocations          `json:"allocations"`
		Mark  MarkRemovalRequest   `json:"mark_removal"`
		Clear ClearRemovalRequest  `json:"clear_removal"`
		Marks RemovalMarks         `json:"removal_marks"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]interface{ Validate() error }{"put_allocation": doc.Put, "mark_removal": doc.Mark, "clear_removal": doc.Clear} {
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if a := doc.List.Allocations; len(a) != 1 || a[0].Subnet != "10.210.3.0/24" || a[0].State != "joined" || a[0].Source != "import:home" {
		t.Fatalf("allocations: %+v", doc.List)
	}
	if m := doc.Marks.Removals; len(m) != 1 || m[0].Project != "shop" || m[0].CreatedAt == 0 {
		t.Fatalf("removal_marks: %+v", doc.Marks)
	}
	reencodes(t, b, map[string]any{"put_allocation": doc.Put, "allocations": doc.List, "mark_removal": doc.Mark,
		"clear_removal": doc.Clear, "removal_marks": doc.Marks})
}

// TestAllocationRequestsRefuseBadInput: each malformed field is refused
// with an invalid_argument error naming it.
func TestAllocationRequestsRefuseBadInput(t *testing.T) {
	op := store.HistoryOperator{Name: "ana"}
	good := Allocation{MachineID: "m3", MachineName: "m3", Subnet: "10.210.3.0/24", State: "allocated", Operator: op}
	with := func(f func(*Allocation)) PutAllocationRequest {
		a := good
		f(&a)
		return PutAllocationRequest{a}
	}
	cases := []struct {
		field string
		req   interface{ Validate() error }
	}{
		{"machine_id", with(func(a *Allocation) { a.MachineID = "" })},
		{"machine_id", with(func(a *Allocation) { a.MachineID = "m3; drop" })},
		{"machine_id", with(func(a *Allocation) { a.MachineID = strings.Repeat("a", 65) })},
		{"machine_name", with(func(a *Allocation) { a.MachineName = "m\x003" })},
		{"subnet", with(func(a *Allocation) { a.Subnet = "" })},
		{"subnet", with(func(a *Allocation) { a.Subnet = "10.210.3.0/33" })},
		{"subnet", with(func(a *Allocation) { a.Subnet = "10.210.3.7/24" })}, // host bits
		{"subnet", with(func(a *Allocation) { a.Subnet = "banana" })},
		{"state", with(func(a *Allocation) { a.State = "done" })},
		{"operator.name", with(func(a *Allocation) { a.Operator.Name = "" })},
		{"project", MarkRemovalRequest{RemovalMark{Project: "a/b", Environment: "prod", Operator: op}}},
		{"environment", MarkRemovalRequest{RemovalMark{Project: "shop", Environment: "", Operator: op}}},
		{"operator.name", MarkRemovalRequest{RemovalMark{Project: "shop", Environment: "prod"}}},
		{"project", ClearRemovalRequest{Project: "", Environment: "prod"}},
	}
	for _, c := range cases {
		err := c.req.Validate()
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Details["field"] != c.field {
			t.Errorf("%+v: got %v, want invalid %s", c.req, err, c.field)
		}
	}
	if err := with(func(*Allocation) {}).Validate(); err != nil {
		t.Fatal(err)
	}
}
