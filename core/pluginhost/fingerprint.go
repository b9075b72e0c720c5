package pluginhost

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ployz/ployz/sdk"
	pluginv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/v1"
)

// Fingerprint runs `path info` and returns the binary's Info without
// starting it as a server, so an installer can check a new binary before it
// replaces the current one.
func Fingerprint(ctx context.Context, path string) (*pluginv1.InfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "info").Output()
	if err != nil {
		return nil, fmt.Errorf("fingerprint %s: %w", path, err)
	}
	var info pluginv1.InfoResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("fingerprint %s: decode Info: %w", path, err)
	}
	return &info, nil
}

// CheckCompatible reports why a fingerprinted binary cannot be installed as
// name for a host speaking apiVersions, or nil.
func CheckCompatible(info *pluginv1.InfoResponse, name string, apiVersions []uint32) error {
	if info.GetName() != name {
		return fmt.Errorf("binary reports name %q, installing as %q", info.GetName(), name)
	}
	if _, ok := sdk.Negotiate(apiVersions, info.GetApiVersions()); !ok {
		return fmt.Errorf("plugin %q speaks plugin-API versions %v, this host %v: none in common",
			name, info.GetApiVersions(), apiVersions)
	}
	for _, c := range info.GetCapabilities() {
		if err := sdk.ValidCapability(c); err != nil {
			return fmt.Errorf("plugin %q: %w", name, err)
		}
	}
	return nil
}
