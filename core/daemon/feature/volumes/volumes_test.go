package volumes

import (
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/volume"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestVolumeErr maps the plugin's answers to Machine RPC errors that name
// their field or label.
func TestVolumeErr(t *testing.T) {
	for _, c := range []struct {
		in          error
		code, field string
		label       bool
	}{
		{status.Error(codes.InvalidArgument, `name: "X" is not a volume name`), rpc.CodeInvalidArgument, "name", false},
		{status.Error(codes.AlreadyExists, `name: volume "db" already exists on this Machine with size 1 bytes`), rpc.CodeConflict, "name", false},
		{status.Error(codes.NotFound, `snapshot: volume "db" has no snapshot "s"`), rpc.CodeNotFound, "snapshot", false},
		{status.Error(codes.FailedPrecondition, `pool: ZFS pool "x" (label `+volume.PoolLabel+`) does not exist on this Machine`), rpc.CodeFailedPrecond, "pool", true},
		{status.Error(codes.FailedPrecondition, "this Machine has no ZFS pool (label "+volume.PoolLabel+" unset)"), rpc.CodeFailedPrecond, "", true},
		{status.Error(codes.Internal, "zfs: boom"), rpc.CodeUnavailable, "", false},
	} {
		var e *rpc.Error
		if !errors.As(volumeErr(c.in, volume.CapCreate), &e) {
			t.Fatalf("%v: not an *rpc.Error", c.in)
		}
		if e.Code != c.code {
			t.Errorf("%v: code %s, want %s", c.in, e.Code, c.code)
		}
		if got, _ := e.Details["field"].(string); got != c.field {
			t.Errorf("%v: field %q, want %q", c.in, got, c.field)
		}
		if _, ok := e.Details["label"]; ok != c.label {
			t.Errorf("%v: label detail %v, want %v", c.in, ok, c.label)
		}
	}
}

// TestReadOnlyFor: a Mirror's dataset is read-only, the Writer's
// writable, and a copy with no role is left as it is.
func TestReadOnlyFor(t *testing.T) {
	for _, c := range []struct {
		role      string
		ro, isSet bool
	}{{volumecopy.Mirror, true, true}, {volumecopy.Writer, false, true}, {volumecopy.None, false, false}, {"", false, false}} {
		if ro, set := readOnlyFor(volumecopy.Copy{Role: c.role}); ro != c.ro || set != c.isSet {
			t.Errorf("%q: readonly %v set %v, want %v %v", c.role, ro, set, c.ro, c.isSet)
		}
	}
}

// TestRefuseReceiveIntoWriter: receive_volume refuses a stream into the
// Writer, naming the copy; a Mirror or no copy takes it.
func TestRefuseReceiveIntoWriter(t *testing.T) {
	w := volumecopy.Copy{Role: volumecopy.Writer, Epoch: 42, Floor: 3}
	var e *rpc.Error
	if err := refuseReceiveIntoWriter("db", w); !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond ||
		e.Details["copy"] != w.View() || !strings.Contains(e.Message, "Writer (epoch 42)") || !strings.Contains(e.Message, "ployz volume mirror db") {
		t.Fatalf("receive into the Writer: %v", err)
	}
	for _, c := range []volumecopy.Copy{{Role: volumecopy.Mirror}, {}} {
		if err := refuseReceiveIntoWriter("db", c); err != nil {
			t.Errorf("%s: refused: %v", c.RoleOf(), err)
		}
	}
}
