package containers

import (
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestServiceContainersLogThroughTheLocalDriver: the Log Store plugin
// reads the local driver's files, so every Container is created with it.
func TestServiceContainersLogThroughTheLocalDriver(t *testing.T) {
	dc := buildCreate(rpc.ContainerSpec{Image: "x", Namespace: "p-prod", Service: "web"}, "net", "", "")
	if dc.host.LogConfig.Type != "local" {
		t.Fatalf("log driver %q, want local", dc.host.LogConfig.Type)
	}
}
