package rpc

import (
	"fmt"
	"strings"
)

// Serving Pointer commands. A Deploy moves a Service's Serving Pointer
// through its entry Machine once the new Containers are ready, then
// waits (serving_status) until every Machine that is not Down acks it,
// before it stops the Containers the move left out (docs/architecture.md bet 3, 9).
const (
	CmdMoveServingPointer = "move_serving_pointer"
	CapMoveServingPointer = "ployz.serving.move.v1"
	CmdServingStatus      = "serving_status"
	CapServingStatus      = "ployz.serving.status.v1"
)

// MoveServingPointerRequest points Service ("namespace/service") at
// Containers. The entry fills each Container's image and deployment from
// its replicated row (waiting briefly for rows that have not arrived).
// Delete removes the pointer instead (the Service is gone).
type MoveServingPointerRequest struct {
	Service    string             `json:"service"`
	Deployment string             `json:"deployment,omitempty"`
	Containers []ServingContainer `json:"containers"`
	Delete     bool               `json:"delete,omitempty"`
}

// ServingContainer is one Container a Serving Pointer names.
type ServingContainer struct {
	ID         string `json:"id"`
	MachineID  string `json:"machine_id"`
	ImageID    string `json:"image_id,omitempty"`
	Deployment string `json:"deployment,omitempty"`
}

// Validate refuses a malformed request, naming the field.
func (r MoveServingPointerRequest) Validate() error {
	ns, svc, ok := strings.Cut(r.Service, "/")
	if !ok || ns == "" || svc == "" || strings.Contains(svc, "/") {
		return Errorf(CodeInvalidArgument, "field \"service\": %q is not namespace/service", r.Service)
	}
	seen := map[string]bool{}
	for i, c := range r.Containers {
		switch {
		case c.ID == "":
			return Errorf(CodeInvalidArgument, "field \"containers[%d].id\" is empty", i)
		case c.MachineID == "":
			return Errorf(CodeInvalidArgument, "field \"containers[%d].machine_id\" is empty", i)
		case seen[c.ID]:
			return Errorf(CodeInvalidArgument, "field \"containers[%d].id\": %s is named twice", i, c.ID)
		}
		seen[c.ID] = true
	}
	if r.Delete && len(r.Containers) > 0 {
		return Errorf(CodeInvalidArgument, "field \"delete\": a deleted pointer names no containers")
	}
	return nil
}

// ServingPointerMoved answers move_serving_pointer.
type ServingPointerMoved struct {
	ID         string             `json:"id"`
	Containers []ServingContainer `json:"containers,omitempty"`
	// Unseen lists named Containers whose rows the entry had not seen:
	// they are named by id and Machine only.
	Unseen []string `json:"unseen,omitempty"`
}

// ServingStatusRequest asks for the named Services' pointers (all when
// empty).
type ServingStatusRequest struct {
	Services []string `json:"services,omitempty"`
	// WaitPointer, with one Service, asks the entry to answer only once
	// every participating Machine that is not Down acks this pointer id,
	// or after WaitSeconds (default 5, at most 60), whichever is first:
	// the caller waits without polling. An entry from before it answers
	// at once, so callers still check the acks they get.
	WaitPointer string `json:"wait_pointer,omitempty"`
	WaitSeconds int    `json:"wait_seconds,omitempty"`
}

// ServingStatus is the entry's observation of Serving Pointers and acks.
type ServingStatus struct {
	ObserverID string           `json:"observer_id"`
	Services   []ServiceServing `json:"services"`
}

// ServiceServing is one Service's pointer and each Machine's ack of it.
type ServiceServing struct {
	Service    string             `json:"service"`
	Pointer    string             `json:"pointer,omitempty"` // empty: none
	Deployment string             `json:"deployment,omitempty"`
	Containers []ServingContainer `json:"containers,omitempty"`
	Acks       []ServingAck       `json:"acks,omitempty"`
}

// ServingAck is one participating Machine's ack as the entry sees it.
type ServingAck struct {
	MachineID string `json:"machine_id"`
	Machine   string `json:"machine"`
	// Membership is the entry's view: up, suspect, down or unknown.
	Membership string `json:"membership"`
	// Acked is the pointer id the Machine's Ingress Proxy follows.
	Acked string `json:"acked,omitempty"`
}

// Current reports whether the ack is of pointer.
func (a ServingAck) Current(pointer string) bool { return a.Acked == pointer }

// Pending lists the Machines that are not Down and have not acked the
// Service's pointer, as "name (state)".
func (s ServiceServing) Pending() []string {
	var out []string
	for _, a := range s.Acks {
		if a.Membership != "down" && !a.Current(s.Pointer) {
			out = append(out, fmt.Sprintf("%s (%s)", a.Machine, a.Membership))
		}
	}
	return out
}
