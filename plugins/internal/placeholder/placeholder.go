// Package placeholder is the entry point of plugin binaries whose issue has
// not landed. Each serves the base Info and Configure calls through the SDK
// with an empty capability list, answers --version, and says plainly (in
// its startup log and its Info description) that it serves nothing yet.
package placeholder

import (
	"fmt"
	"os"

	"github.com/ployz/ployz/core/version"
	"github.com/ployz/ployz/sdk"
)

// kinds maps each placeholder plugin to its plugin kind.
var kinds = map[string]string{
	"dns":           sdk.KindDNS,
	"ingress-caddy": sdk.KindIngress,
	"volume-zfs":    sdk.KindVolume,
	"logstore":      sdk.KindLogStore,
	"metrics":       sdk.KindMetrics,
}

// Main runs the placeholder plugin named name and exits.
func Main(name string) {
	kind, ok := kinds[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "placeholder: unknown plugin %q\n", name)
		os.Exit(2)
	}
	sdk.Main(Plugin(name, kind))
}

// Plugin describes a placeholder: no capability, no kind service.
func Plugin(name, kind string) *sdk.Plugin {
	return &sdk.Plugin{
		Name:        name,
		Kind:        kind,
		Version:     version.Version,
		Description: fmt.Sprintf("ployz-%s is not implemented yet: it serves no capability, only Info and Configure.", name),
	}
}
