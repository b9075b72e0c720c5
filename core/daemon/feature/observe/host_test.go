package observe

import (
	"net/netip"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	sdkobserve "github.com/ployz/ployz/sdk/observe"
)

// testHost is a Machine without a plugin host, its runtime directory in
// runDir, that counted nothing.
type testHost struct{ runDir string }

func (testHost) Machine() machine.Record                         { return machine.Record{ID: "m1", Name: "self"} }
func (testHost) Plugins() feature.Plugins                        { return nil }
func (testHost) ManagementIP() (netip.Addr, error)               { return netip.MustParseAddr("fd00::1"), nil }
func (h testHost) RunDir() string                                { return h.runDir }
func (testHost) PluginStatus() []pluginhost.PluginStatus         { return nil }
func (testHost) JobRuns() []sdkobserve.JobRuns                   { return nil }
func (testHost) VolumeProtection() []sdkobserve.VolumeProtection { return nil }

var _ Host = testHost{}
