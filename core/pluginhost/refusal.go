package pluginhost

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusal detail conventions (docs/architecture.md Machine RPC rule 7): a refused
// catalogued call carries a google.rpc.ErrorInfo whose metadata key
// "capability" names what is missing.
const (
	CapabilityMetadataKey       = "capability"
	ReasonCapabilityUnavailable = "CAPABILITY_UNAVAILABLE"
	ErrorDomain                 = "ployz.dev"
)

// CapabilityError builds a gRPC status error refusing a call because
// capability is not served. code is usually codes.Unavailable (a plugin
// that served it is down) or codes.Unimplemented (nothing here serves it).
func CapabilityError(code codes.Code, capability, message string) error {
	st := status.New(code, message)
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason:   ReasonCapabilityUnavailable,
		Domain:   ErrorDomain,
		Metadata: map[string]string{CapabilityMetadataKey: capability},
	})
	if err != nil {
		// Only fails if the detail cannot be marshalled; keep the message.
		return st.Err()
	}
	return withInfo.Err()
}

// CapabilityFromError returns the capability a refusal names in
// details.capability, and false when err carries none. It looks through
// wrapped errors.
func CapabilityFromError(err error) (string, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		st, ok := status.FromError(e)
		if !ok {
			continue
		}
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				if c, ok := info.GetMetadata()[CapabilityMetadataKey]; ok {
					return c, true
				}
			}
		}
		return "", false
	}
	return "", false
}
