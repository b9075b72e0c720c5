package feature

import (
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// DockerErr maps a Docker API error onto the Machine RPC code a caller
// can act on, with msg (format, args) as context.
func DockerErr(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	switch {
	case cerrdefs.IsNotFound(err):
		return rpc.Errorf(rpc.CodeNotFound, "%s: %v", msg, err)
	case cerrdefs.IsConflict(err):
		return rpc.Errorf(rpc.CodeConflict, "%s: %v", msg, err)
	case cerrdefs.IsInvalidArgument(err):
		return rpc.Errorf(rpc.CodeInvalidArgument, "%s: %v", msg, err)
	case client.IsErrConnectionFailed(err):
		return rpc.Errorf(rpc.CodeUnavailable, "%s: docker: %v", msg, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// Short is a Docker ID as logs show it.
func Short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
