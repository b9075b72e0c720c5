package feature

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
)

// Plugins is the daemon's plugin host as a feature calls it
// (*pluginhost.Host).
type Plugins interface {
	// Available reports whether a healthy plugin serves capability.
	Available(capability string) bool
	// Call runs fn against the plugin serving capability.
	Call(ctx context.Context, capability string, fn func(context.Context, *grpc.ClientConn) error) error
}

var _ Plugins = (*pluginhost.Host)(nil)

// PluginErr turns a plugin call's failure into a Machine RPC error: a
// refusal keeps the capability it names, the plugin's own argument
// errors stay invalid_argument, anything else is unavailable.
func PluginErr(err error, capability string) error {
	if c, ok := pluginhost.CapabilityFromError(err); ok {
		return rpc.Errorf(rpc.CodeUnavailable, "%s", status.Convert(err).Message()).With("capability", c)
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument:
		return rpc.Errorf(rpc.CodeInvalidArgument, "%s", st.Message())
	case codes.ResourceExhausted:
		return rpc.Errorf(rpc.CodeUnavailable, "%s", st.Message()).With("capability", capability)
	}
	return rpc.Errorf(rpc.CodeUnavailable, "%s: %s", capability, st.Message()).With("capability", capability)
}
