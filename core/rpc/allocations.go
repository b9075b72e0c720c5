package rpc

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/store"
)

// Allocation history and project removal marks in the Cluster: an
// enrollment records the subnet it gives a Machine through its entry
// before it publishes the Machine, and `ployz project rm` marks the
// namespace there, so every operator's next enrollment, deploy or
// removal sees them (docs/formats.md).
const (
	CmdPutAllocation   = "put_allocation"
	CapPutAllocation   = "ployz.operator.put_allocation.v1"
	CmdListAllocations = "list_allocations"
	CapListAllocations = "ployz.operator.list_allocations.v1"
	CmdMarkRemoval     = "mark_removal"
	CapMarkRemoval     = "ployz.operator.mark_removal.v1"
	CmdClearRemoval    = "clear_removal"
	CapClearRemoval    = "ployz.operator.clear_removal.v1"
	CmdListRemovals    = "list_removals"
	CapListRemovals    = "ployz.operator.list_removals.v1"
)

// AllocationStates are the states an allocation moves through.
var AllocationStates = []string{"allocated", "joined", "failed", "removed"}

// Allocation is one Machine's subnet in the allocation history.
type Allocation struct {
	MachineID   string                `json:"machine_id"`
	MachineName string                `json:"machine_name,omitempty"`
	Subnet      string                `json:"subnet"`
	State       string                `json:"state"`
	Operator    store.HistoryOperator `json:"operator"`
	// CreatedAt and UpdatedAt (unix ms) are stamped by the entry.
	CreatedAt int64 `json:"created_at,omitempty"`
	UpdatedAt int64 `json:"updated_at,omitempty"`
	// Source is set by an import ("import:<context>").
	Source string `json:"source,omitempty"`
}

// PutAllocationRequest records (or moves the state of) MachineID's
// allocation. A Machine keeps the subnet it was first given, and a
// subnet another Machine was given is refused: the history is the
// record that no subnet is handed out twice.
type PutAllocationRequest struct {
	Allocation
}

// Allocations answers list_allocations: the whole history, oldest first.
type Allocations struct {
	Allocations []Allocation `json:"allocations"`
}

// RemovalMark is a pending project removal.
type RemovalMark struct {
	Project     string                `json:"project"`
	Environment string                `json:"environment"`
	Operator    store.HistoryOperator `json:"operator"`
	CreatedAt   int64                 `json:"created_at,omitempty"` // unix ms, stamped by the entry
}

// MarkRemovalRequest marks Project's Environment for removal; marking a
// namespace already marked keeps the first mark.
type MarkRemovalRequest struct {
	RemovalMark
}

// ClearRemovalRequest drops the mark of Project's Environment: its
// removal finished, or a deploy superseded it. Clearing no mark succeeds.
type ClearRemovalRequest struct {
	Project     string `json:"project"`
	Environment string `json:"environment"`
}

// RemovalMarks answers list_removals, by project and environment.
type RemovalMarks struct {
	Removals []RemovalMark `json:"removals"`
}

// Validate refuses a malformed request, naming the field.
func (r PutAllocationRequest) Validate() error {
	switch {
	case !isID(r.MachineID):
		return InvalidField("machine_id", "%q: want 1 to %d letters, digits, '-' or '_'", clip(r.MachineID), historyMaxID)
	case len(r.MachineName) > 128 || !printable(r.MachineName):
		return InvalidField("machine_name", "%q: want at most 128 printable characters", clip(r.MachineName))
	case !validSubnet(r.Subnet):
		return InvalidField("subnet", "%q: want an IPv4 or IPv6 prefix such as 10.210.3.0/24", clip(r.Subnet))
	case !slices.Contains(AllocationStates, r.State):
		return InvalidField("state", "%q: want one of %s", clip(r.State), strings.Join(AllocationStates, ", "))
	case !validOperator(r.Operator):
		return InvalidField("operator.name", "%q: want 1 to 128 printable characters", clip(r.Operator.Name))
	case len(r.Source) > 200 || !printable(r.Source):
		return InvalidField("source", "want at most 200 printable characters")
	}
	return nil
}

// validSubnet accepts a prefix in its canonical form (no host bits).
func validSubnet(s string) bool {
	p, err := netip.ParsePrefix(s)
	return err == nil && p.Masked() == p
}

// validProjectEnv refuses a malformed project or environment name.
func validProjectEnv(project, env string) error {
	switch {
	case project == "" || len(project) > 64 || !printable(project) || strings.ContainsAny(project, "/ "):
		return InvalidField("project", "%q: want a project name", clip(project))
	case env == "" || len(env) > 64 || !printable(env) || strings.ContainsAny(env, "/ "):
		return InvalidField("environment", "%q: want an environment name", clip(env))
	}
	return nil
}

func validOperator(op store.HistoryOperator) bool {
	return op.Name != "" && len(op.Name) <= 128 && printable(op.Name)
}

// Validate refuses a malformed request, naming the field.
func (r MarkRemovalRequest) Validate() error {
	if err := validProjectEnv(r.Project, r.Environment); err != nil {
		return err
	}
	if !validOperator(r.Operator) {
		return InvalidField("operator.name", "%q: want 1 to 128 printable characters", clip(r.Operator.Name))
	}
	return nil
}

// Validate refuses a malformed request, naming the field.
func (r ClearRemovalRequest) Validate() error { return validProjectEnv(r.Project, r.Environment) }

// Refuses answers why a cannot be recorded over the history h (nil: it
// can): a's Machine was given another subnet, or another Machine was
// given a's. A conflict naming the subnet field.
func (h Allocations) Refuses(a Allocation) *Error {
	for _, r := range h.Allocations {
		switch {
		case r.MachineID == a.MachineID && r.Subnet != a.Subnet:
			return Errorf(CodeConflict, "subnet: machine %s was given %s, not %s", a.MachineID, r.Subnet, a.Subnet).With("field", "subnet")
		case r.MachineID != a.MachineID && r.Subnet == a.Subnet:
			return Errorf(CodeConflict, "subnet: %s was given to machine %s (%s)", a.Subnet, r.MachineName, r.MachineID).With("field", "subnet")
		}
	}
	return nil
}
