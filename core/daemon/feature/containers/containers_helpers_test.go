package containers

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/containers/containerstest"
	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// testOps is Ops on a throwaway network with one namespace
// (containerstest.Env).
type testOps struct {
	*Ops
	*containerstest.Env
	cfg   Config
	facts Facts
}

func newTestOps(t *testing.T) *testOps {
	t.Helper()
	env := containerstest.New(t)
	to := &testOps{Env: env,
		facts: Facts{MachineID: "m-test", Name: "test", Phase: machine.Participating, Labels: map[string]string{"zone": "a"}, DNS: env.DNS}}
	to.cfg = Config{Docker: env.Cli, Network: env.Network, NotifyDir: env.NotifyDir,
		StatePath: env.StatePath, FilesDir: env.FilesDir, Facts: func() Facts { return to.facts },
		Logger: testLogger(t)}
	to.Ops = New(to.cfg)
	return to
}

// execIn runs cmd in Container id and returns its exit code and output.
func execIn(t *testing.T, cli *client.Client, id string, cmd ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	created, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	att, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec %v: output: %v", cmd, err)
	}
	ins, err := cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return ins.ExitCode, out.String()
}

// createStart creates and starts one Container, returning its ID.
func (to *testOps) createStart(t *testing.T, service string, spec rpc.ContainerSpec) string {
	t.Helper()
	ob := featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.createContainer), rpc.CreateContainerRequest{Name: to.Name(service), Spec: spec})
	featuretest.Must[rpc.ContainerObservation](t, featuretest.Typed(to.startContainer), rpc.ContainerRef{ID: ob.ID})
	return ob.ID
}

// testLogger logs to stderr when PLOYZ_TEST_LOG is set (containerstest.Logger).
func testLogger(t *testing.T) hclog.Logger { return containerstest.Logger(t) }

// testRows is the daemon's side of the observe loop over a real store
// node: this Machine's ID, rows written plain, resetting at will.
type testRows struct {
	st        *sdkstore.Client
	self      string
	resetting atomic.Bool
}

func (r *testRows) RowStore() *sdkstore.Client {
	if r.resetting.Load() {
		return nil
	}
	return r.st
}

func (r *testRows) MachineID() string { return r.self }

func (r *testRows) CredentialSealer(context.Context, *sdkstore.Client) *sdkstore.Sealer { return nil }

// observedOps is testOps whose observe loop publishes to a real store
// node, as a participating Machine's does.
func observedOps(t *testing.T) (*testOps, *testRows, *sdkstore.Client) {
	t.Helper()
	to := newTestOps(t)
	_, st := featuretest.Store(t, to.facts.MachineID)
	rows := &testRows{st: st, self: to.facts.MachineID}
	to.cfg.Rows = rows
	to.Ops = New(to.cfg)
	return to, rows, st
}
