package daemon

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/containers"
	"github.com/ployz/ployz/core/daemon/feature/containers/containerstest"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// testOps is the Container commands (feature/containers) on a throwaway
// network with one namespace (containerstest.Env), for the daemon's
// loops that observe, retire and deploy Service Containers.
type testOps struct {
	*containerstest.Env
	containerOps *containers.Ops
	cfg          containers.Config
	facts        containers.Facts
}

func newTestOps(t *testing.T) *testOps {
	t.Helper()
	env := containerstest.New(t)
	to := &testOps{Env: env,
		facts: containers.Facts{MachineID: "m-test", Name: "test", Phase: machine.Participating, Labels: map[string]string{"zone": "a"}, DNS: env.DNS}}
	to.cfg = containers.Config{Docker: env.Cli, Network: env.Network, NotifyDir: env.NotifyDir,
		StatePath: env.StatePath, FilesDir: env.FilesDir, Facts: func() containers.Facts { return to.facts },
		Logger: testLogger(t)}
	to.containerOps = containers.New(to.cfg)
	return to
}

// createStart creates and starts one Container through the commands'
// routes, returning its ID.
func (to *testOps) createStart(t *testing.T, service string, spec rpc.ContainerSpec) string {
	t.Helper()
	routes := to.containerOps.Routes()
	ob := featuretest.Must[rpc.ContainerObservation](t, route(t, routes, rpc.CmdCreateContainer), rpc.CreateContainerRequest{Name: to.Name(service), Spec: spec})
	featuretest.Must[rpc.ContainerObservation](t, route(t, routes, rpc.CmdStartContainer), rpc.ContainerRef{ID: ob.ID})
	return ob.ID
}

// route is routes' handler of command, as Machine RPC serves it.
func route(t *testing.T, routes []rpc.Route, command string) rpc.Handler {
	t.Helper()
	for _, r := range routes {
		if r.Command == command {
			return r.Handler
		}
	}
	t.Fatalf("no route %s", command)
	return nil
}

// testLogger logs to stderr when PLOYZ_TEST_LOG is set (containerstest.Logger).
func testLogger(t *testing.T) hclog.Logger { return containerstest.Logger(t) }

// featureRoute is the handler of command as d's features serve it.
func featureRoute(t testing.TB, d *Daemon, command string) rpc.Handler {
	t.Helper()
	routes, _ := features(featureHost{d})
	for _, r := range routes {
		if r.Command == command {
			return r.Handler
		}
	}
	t.Fatalf("no feature serves %s", command)
	return nil
}
