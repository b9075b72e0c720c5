// Package version holds the build's version string, stamped at link time.
package version

// Version is the release of this build. `make build` overrides it with
// -ldflags "-X github.com/ployz/ployz/internal/version.Version=...".
var Version = "0.0.0-dev"

// ProtocolMajor is the Machine RPC major version this build speaks.
// A change that cannot be expressed additively waits for the next major
// (docs/formats.md, "Stable promise").
const ProtocolMajor = 1
