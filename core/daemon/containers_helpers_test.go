package daemon

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"

	"github.com/ployz/ployz/internal/dockertest"
)

// dockerForTest returns a Docker client, skipping the test when no Docker
// daemon answers.
func dockerForTest(t *testing.T) *client.Client { return dockertest.Client(t) }

var (
	testImageOnce sync.Once
	testImageRef  string
	testImageErr  error
)

// testAppImage builds e2e/testapp statically and imports it FROM scratch
// under a tag of its own (the lab's ployz-testapp tag is left alone).
func testAppImage(t *testing.T, cli *client.Client) string {
	t.Helper()
	testImageOnce.Do(func() { testImageRef, testImageErr = importTestApp(cli) })
	if testImageErr != nil {
		t.Fatalf("testapp image: %v", testImageErr)
	}
	return testImageRef
}

// buildTestApp builds e2e/testapp statically into dir.
func buildTestApp(dir string) (string, error) {
	bin := filepath.Join(dir, "testapp")
	cmd := exec.Command("go", "build", "-o", bin, "../../e2e/testapp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(err.Error() + ": " + string(out))
	}
	return bin, nil
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

func importTestApp(cli *client.Client) (string, error) {
	dir, err := os.MkdirTemp("", "ployz-testapp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bin, err := buildTestApp(dir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	ref := "ployz-daemontest-testapp:" + hex.EncodeToString(sum[:])[:16]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	tw.WriteHeader(&tar.Header{Name: "testapp", Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}) // in memory
	tw.Write(b)                                                                                           // in memory
	tw.Close()
	rc, err := cli.ImageImport(ctx, image.ImportSource{Source: &layer, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/testapp"]`, "EXPOSE 8080"}})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	io.Copy(io.Discard, rc) // progress
	return ref, nil
}

// testOps is containerOps on a throwaway network with one namespace.
type testOps struct {
	*containerOps
	cli       *client.Client
	image     string
	namespace string
	cfg       containerConfig
	facts     localFacts
}

func newTestOps(t *testing.T) *testOps {
	t.Helper()
	cli := dockerForTest(t)
	img := testAppImage(t, cli)
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
	// Short: a unix socket path must fit in 108 bytes.
	notifyDir, err := os.MkdirTemp("", "pzn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(notifyDir) })
	ns := "pzt-" + suffix
	to := &testOps{cli: cli, image: img, namespace: ns,
		facts: localFacts{MachineID: "m-test", Name: "test", Phase: machine.Participating, Labels: map[string]string{"zone": "a"}, DNS: dns}}
	to.cfg = containerConfig{Docker: cli, Network: netName, NotifyDir: notifyDir,
		StatePath: filepath.Join(t.TempDir(), "readiness.json"), FilesDir: filepath.Join(t.TempDir(), "files"), Facts: func() localFacts { return to.facts },
		Logger: testLogger(t)}
	to.containerOps = newContainerOps(to.cfg)
	t.Cleanup(func() { to.cleanup() })
	return to
}

// cleanup removes every Container and volume of the test's namespace.
func (to *testOps) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", rpc.LabelNamespace+"="+to.namespace))
	list, _ := to.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range list {
		to.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) // best effort
	}
	vols, _ := to.cli.VolumeList(ctx, volume.ListOptions{Filters: f})
	for _, v := range vols.Volumes {
		to.cli.VolumeRemove(ctx, v.Name, true) // best effort
	}
}

// spec is a minimal valid spec for the test's namespace.
func (to *testOps) spec(service string, env map[string]string) rpc.ContainerSpec {
	return rpc.ContainerSpec{Namespace: to.namespace, Service: service, ServiceID: "sid-" + service, DeploymentID: "dep1",
		SpecHash: "hash1", Image: to.image, Env: env}
}

func (to *testOps) name(service string) string { return to.namespace + "-" + service }

// call runs a handler with req as its JSON payload and decodes the answer into T.
func call[T any](t *testing.T, h rpc.Handler, req any) (T, error) {
	t.Helper()
	var out T
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := h(ctx, raw)
	if err != nil {
		return out, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %T: %v", out, err)
	}
	return out, nil
}

func must[T any](t *testing.T, h rpc.Handler, req any) T {
	t.Helper()
	out, err := call[T](t, h, req)
	if err != nil {
		t.Fatalf("%T: %v", req, err)
	}
	return out
}

// createStart creates and starts one Container, returning its ID.
func (to *testOps) createStart(t *testing.T, service string, spec rpc.ContainerSpec) string {
	t.Helper()
	ob := must[rpc.ContainerObservation](t, typed(to.createContainer), rpc.CreateContainerRequest{Name: to.name(service), Spec: spec})
	must[rpc.ContainerObservation](t, typed(to.startContainer), rpc.ContainerRef{ID: ob.ID})
	return ob.ID
}

func rpcCode(err error) string {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func rpcDetail(err error, key string) any {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Details[key]
	}
	return nil
}

// testLogger logs to stderr when PLOYZ_TEST_LOG is set; goroutines may
// outlive the test, so never to t.Log.
func testLogger(t *testing.T) hclog.Logger {
	if os.Getenv("PLOYZ_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: os.Stderr})
}

// typed is a typed handler as the route table serves it: its request
// decoded from JSON, its answer encoded, as rpc.Bind does.
func typed[Req, Resp any](h func(context.Context, Req) (Resp, error)) rpc.Handler {
	return rpc.Method[Req, Resp]{Name: "test"}.Handler(h)
}

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
