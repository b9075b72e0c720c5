package volumecopy

import (
	"fmt"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Roles a copy has. None is a volume this Machine holds (or held) with no
// role in a Volume Run: one received by hand, or a Mirror deleted.
const (
	None   = "none"
	Writer = "writer"
	Mirror = "mirror"
)

// ValidRole reports whether r is a role a request may name.
func ValidRole(r string) bool { return r == None || r == Writer || r == Mirror }

// Copy is one volume's copy on this Machine. The JSON names are frozen
// (the file outlives a daemon upgrade): fields are only added.
type Copy struct {
	Role string `json:"role"`
	// Epoch is a Writer's epoch: when (unix ns) this copy last became the
	// Writer, raised past the previous one. Reported, never checked here.
	Epoch int64 `json:"epoch,omitempty"`
	// Floor is the newest Volume Run gen SetVolumeCopy accepted for this
	// copy; a request with a lower gen is refused.
	Floor uint64 `json:"floor,omitempty"`
	// Changed is when (unix ns) the role last changed.
	Changed int64 `json:"changed_unix_nano,omitempty"`
}

// RoleOf is c's role, None for the zero Copy.
func (c Copy) RoleOf() string {
	if c.Role == "" {
		return None
	}
	return c.Role
}

// View is c as Machine RPC reports it.
func (c Copy) View() rpc.VolumeCopy {
	return rpc.VolumeCopy{Role: c.RoleOf(), Epoch: c.Epoch, Floor: c.Floor}
}

// Facts are what this Machine sees of the volume now, for the rows that
// need them.
type Facts struct {
	// Exists: the volume's dataset is on this Machine.
	Exists bool
	// MountedBy names the running Containers that mount it.
	MountedBy []string
	// Busy names the running Container tasks on it (Tasks.Running): a
	// role change waits until Docker answers them.
	Busy []string
}

// Apply is SetVolumeCopy's transition table. It answers the copy after
// req (changed reports whether it differs from cur), or a refusal naming
// the field; a refusal leaves cur as it is. now stamps a new Writer epoch.
//
// The rows (expect → want):
//
//	none   → writer  adopt the dataset as the Writer (it must exist); new epoch
//	none   → mirror  declare the received dataset a Mirror (it must exist)
//	mirror → writer  promote the Mirror; new epoch
//	writer → mirror  demote the Writer (refused while a running Container mounts it)
//	mirror → none    forget the Mirror role (the dataset stays until `volume rm`)
//	writer → none    refused: a Writer leaves only by becoming a Mirror
//
// A gen below the copy's floor is refused (a late call from an older
// run) before anything else; a copy already at want answers success (a
// replay), raising the floor; a role change while a Container task runs
// on the volume is refused as busy; a copy at neither expect nor want is
// refused naming expect.
func Apply(cur Copy, req rpc.SetVolumeCopyRequest, f Facts, now time.Time) (next Copy, changed bool, err error) {
	if err := validate(req); err != nil {
		return cur, false, err
	}
	have := cur.RoleOf()
	if err := checkFloor(cur, req.Gen, req.Volume); err != nil {
		return cur, false, err
	}
	next = cur
	next.Floor = req.Gen
	if have == req.Want {
		return next, next != cur, nil
	}
	if len(f.Busy) > 0 {
		return cur, false, refuse(cur, "volume", "volume %q is busy on this Machine: %v holds its mount until Docker answers; ask again after",
			req.Volume, f.Busy).With("busy", f.Busy)
	}
	if have != req.Expect {
		return cur, false, refuse(cur, "expect", "volume %q's copy here is %s, not %s: it changed since the operator looked (read it again with `ployz volume inspect`)",
			req.Volume, have, req.Expect)
	}
	switch {
	case req.Want == Writer && (have == None || have == Mirror):
		if !f.Exists {
			return cur, false, refuse(cur, "volume", "volume %q is not on this Machine: a Writer needs its dataset", req.Volume)
		}
		next.Epoch = max(now.UnixNano(), cur.Epoch+1)
	case req.Want == Mirror && have == None:
		if !f.Exists {
			return cur, false, refuse(cur, "volume", "volume %q is not on this Machine: receive its stream before declaring it a Mirror", req.Volume)
		}
		next.Epoch = 0
	case req.Want == Mirror && have == Writer:
		if len(f.MountedBy) > 0 {
			return cur, false, refuse(cur, "want", "volume %q is mounted by running Container %v: stop it before the Writer becomes a Mirror", req.Volume, f.MountedBy)
		}
		next.Epoch = 0
	case req.Want == None && have == Mirror:
		next.Epoch = 0
	default: // writer → none
		return cur, false, refuse(cur, "want", "a Writer becomes none only through a Mirror: ask for %s → %s first", Writer, Mirror)
	}
	next.Role = req.Want
	next.Changed = now.UnixNano()
	return next, true, nil
}

func validate(req rpc.SetVolumeCopyRequest) error {
	if req.Gen == 0 {
		return rpc.InvalidField("gen", "required: the Volume Run's gen (1 or more)")
	}
	if !ValidRole(req.Expect) {
		return rpc.InvalidField("expect", "%q is not a copy role (none, writer or mirror)", req.Expect)
	}
	if !ValidRole(req.Want) {
		return rpc.InvalidField("want", "%q is not a copy role (none, writer or mirror)", req.Want)
	}
	return nil
}

// checkFloor refuses gen below cur's floor: a late request from an
// older run.
func checkFloor(cur Copy, gen uint64, volume string) error {
	if gen >= cur.Floor {
		return nil
	}
	return refuse(cur, "gen", "%d is below this copy's floor %d: a newer Volume Run (gen %d) has touched volume %q here, so this late request from an older run is refused",
		gen, cur.Floor, cur.Floor, volume)
}

// refuse is a failed_precondition naming field, with the copy as it is.
func refuse(cur Copy, field, format string, args ...any) *rpc.Error {
	return rpc.Errorf(rpc.CodeFailedPrecond, "%s: %s", field, fmt.Sprintf(format, args...)).
		With("field", field).With("copy", cur.View())
}
