package daemon

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/volume"
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
