package daemon

import (
	"testing"

	"github.com/ployz/ployz/sdk/ingress"
)

// Every port the daemon listens on is reserved from tcp ingress routes: a
// route on one would take it during a restart and break the daemon's
// next start (an ingress_port of 7574 or 9101 used to be accepted).
func TestDaemonPortsAreReserved(t *testing.T) {
	for name, port := range map[string]int{"RPCPort": RPCPort, "GossipPort": GossipPort, "StoreAPIPort": StoreAPIPort,
		"VolumePort": VolumePort, "MetricsPort": MetricsPort} {
		if _, ok := ingress.ReservedPorts[port]; !ok {
			t.Errorf("%s %d is not in ingress.ReservedPorts", name, port)
		}
	}
}
