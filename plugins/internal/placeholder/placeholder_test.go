package placeholder_test

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/plugintest"
)

// TestPlaceholdersServeInfoWithNoCapability builds each plugin binary and
// checks it answers Info, names itself, advertises nothing and says so.
func TestPlaceholdersServeInfoWithNoCapability(t *testing.T) {
	for _, name := range []string{"volume-zfs"} {
		t.Run(name, func(t *testing.T) {
			bin := plugintest.Build(t, "github.com/ployz/ployz/plugins/"+name)
			p := plugintest.Start(t, bin)
			if p.Info.GetName() != name || p.Info.GetKind() == "" {
				t.Fatalf("Info = %v", p.Info)
			}
			if len(p.Info.GetCapabilities()) != 0 {
				t.Fatalf("placeholder advertises %v", p.Info.GetCapabilities())
			}
			if !strings.Contains(p.Info.GetDescription(), "not implemented yet") {
				t.Fatalf("description %q does not say it serves nothing", p.Info.GetDescription())
			}
			p.Configure(t, nil)
		})
	}
}
