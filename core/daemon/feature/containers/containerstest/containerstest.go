package containerstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/dockertest"
)

// Env is one test's Docker world: every Container and volume it creates
// under Namespace is removed when the test ends, and so is Network.
type Env struct {
	Cli       *client.Client
	Image     string // the testapp image (dockertest.TestApp)
	Namespace string
	Network   string // a bridge network of the test's own
	DNS       string // Network's gateway, the resolver Containers get
	NotifyDir string // short: a unix socket path must fit in 108 bytes
	StatePath string // readiness verdicts
	FilesDir  string // shipped files
}

// New makes an Env, or ends t through prereq when no Docker answers.
func New(t testing.TB) *Env {
	t.Helper()
	cli := dockertest.Client(t)
	img := dockertest.TestApp(t, cli)
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b) // never fails
	suffix := hex.EncodeToString(b)
	netName := "pzt-" + suffix
	if _, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge"}); err != nil {
		t.Fatalf("create test network: %v", err)
	}
	t.Cleanup(func() { cli.NetworkRemove(context.Background(), netName) }) // best effort
	nw, err := cli.NetworkInspect(ctx, netName, network.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dns := ""
	if len(nw.IPAM.Config) > 0 {
		dns = nw.IPAM.Config[0].Gateway
	}
	notifyDir, err := os.MkdirTemp("", "pzn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(notifyDir) })
	e := &Env{Cli: cli, Image: img, Namespace: "pzt-" + suffix, Network: netName, DNS: dns, NotifyDir: notifyDir,
		StatePath: filepath.Join(t.TempDir(), "readiness.json"), FilesDir: filepath.Join(t.TempDir(), "files")}
	t.Cleanup(e.cleanup)
	return e
}

// cleanup removes every Container and volume of the test's namespace.
func (e *Env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", rpc.LabelNamespace+"="+e.Namespace))
	list, _ := e.Cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range list {
		e.Cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) // best effort
	}
	vols, _ := e.Cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vols.Volumes {
		e.Cli.VolumeRemove(ctx, v.Name, true) // best effort
	}
}

// Spec is a minimal valid spec for the test's namespace.
func (e *Env) Spec(service string, env map[string]string) rpc.ContainerSpec {
	return rpc.ContainerSpec{Namespace: e.Namespace, Service: service, ServiceID: "sid-" + service, DeploymentID: "dep1",
		SpecHash: "hash1", Image: e.Image, Env: env}
}

// Name is the Container name of service in the test's namespace.
func (e *Env) Name(service string) string { return e.Namespace + "-" + service }

// Logger logs to stderr when PLOYZ_TEST_LOG is set; goroutines may
// outlive the test, so never to t.Log.
func Logger(t testing.TB) hclog.Logger {
	if os.Getenv("PLOYZ_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: os.Stderr})
}
