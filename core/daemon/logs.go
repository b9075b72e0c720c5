package daemon

import (
	"github.com/ployz/ployz/core/daemon/feature"
)

// pluginErr is feature.PluginErr.
func pluginErr(err error, capability string) error { return feature.PluginErr(err, capability) }
