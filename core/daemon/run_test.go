package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
)

// runDaemon runs ployzd's Run on temporary directories and returns a
// client on its unix socket, as the CLI on the Machine would use it.
func runDaemon(t *testing.T, dataDir string) (*rpc.Client, Config, func() error) {
	t.Helper()
	run, err := os.MkdirTemp("", "pzr") // a socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	prevUnits := runtimeUnitDir
	runtimeUnitDir = t.TempDir() // Run retires old units there
	t.Cleanup(func() { runtimeUnitDir = prevUnits })
	cfg := Config{DataDir: dataDir, RunDir: run, Socket: filepath.Join(run, "ployz.sock"), Units: &units{}, Logger: hclog.NewNullLogger()}
	if os.Getenv("PLOYZ_TEST_LOG") != "" {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(20 * time.Second):
				stopErr = errors.New("Run did not return within 20s of its context ending")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { stop() }) // the test checks it when it matters
	sock := cfg.Socket
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned before serving: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no socket after 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := rpc.DialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg, stop
}

// TestRunServesAnUninitializedMachine starts the daemon as a fresh Machine
// boots: it mints and saves an ID, creates its RPC identity (0600), serves
// a 0600 socket, answers inspect and update_machine, refuses what needs a
// Cluster naming its phase, and returns when its context ends.
func TestRunServesAnUninitializedMachine(t *testing.T) {
	dataDir := t.TempDir()
	c, cfg, stop := runDaemon(t, dataDir)
	ctx := context.Background()
	saved, err := machine.Load(filepath.Join(dataDir, "machine.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in rpc.Inspection
	if err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.Inspect, rpc.None{}, &in); err != nil {
		t.Fatal(err)
	}
	if in.ID != saved.ID || in.ID == "" || in.Phase != machine.Uninitialized || in.RPCKey == "" || in.PublicKey == "" ||
		len(in.Capabilities) == 0 || len(in.Endpoints) == 0 && len(discoverEndpoints(cfg.WireGuardPort)) > 0 {
		t.Fatalf("inspection %+v (saved ID %s)", in, saved.ID)
	}
	sockMode := os.FileMode(0o600)
	if _, err := user.LookupGroup(SocketGroup); err == nil {
		sockMode = 0o660
	}
	for path, want := range map[string]os.FileMode{filepath.Join(dataDir, rpc.IdentityFile): 0o600, cfg.Socket: sockMode} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
	name := "renamed"
	if err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.UpdateMachine, rpc.UpdateMachineRequest{Name: &name}, &in); err != nil {
		t.Fatal(err)
	}
	if saved, _ = machine.Load(filepath.Join(dataDir, "machine.json")); saved.Name != "renamed" || in.Name != "renamed" {
		t.Fatalf("renamed: saved %q, answered %q", saved.Name, in.Name)
	}
	for _, cmd := range []string{rpc.CmdListMachines, rpc.CmdMembership} {
		err := c.Call(ctx, rpc.Target{}, cmd, nil, nil)
		if featuretest.Code(err) != rpc.CodeFailedPrecond || !strings.Contains(err.Error(), "uninitialized") {
			t.Errorf("%s on an uninitialized Machine: %v", cmd, err)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rpc.InvokeInto(cctx, c, rpc.Target{}, rpc.Inspect, rpc.None{}, &in); err == nil {
		t.Fatal("the socket still answers after Run returned")
	}
}

// TestRunFinishesAnInterruptedReset: a daemon that stopped mid-reset
// finishes it before serving, so the Machine comes back uninitialized with
// a new ID and without its WireGuard key or store state.
func TestRunFinishesAnInterruptedReset(t *testing.T) {
	files := t.TempDir()
	prevDNS, prevIngress, prevMetrics, prevChain := dnsSpecFile, ingressSpecFile, metricsSpecFile, inputChainPrefix
	t.Cleanup(func() {
		dnsSpecFile, ingressSpecFile, metricsSpecFile, inputChainPrefix = prevDNS, prevIngress, prevMetrics, prevChain
	})
	dnsSpecFile, ingressSpecFile = filepath.Join(files, "dns.json"), filepath.Join(files, "ingress.json")
	metricsSpecFile = filepath.Join(files, "metrics.json")
	inputChainPrefix = "PZR" + machine.NewID()[:6] // none: nothing of this host's is removed

	dataDir := t.TempDir()
	old := machine.Record{ID: machine.NewID(), Name: "m1", Phase: machine.Resetting}
	if err := machine.Save(filepath.Join(dataDir, "machine.json"), old); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dataDir, "wireguard.key"), filepath.Join(dataDir, "store", "token"), dnsSpecFile} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, _, _ := runDaemon(t, dataDir)
	var in rpc.Inspection
	if err := c.Call(context.Background(), rpc.Target{}, rpc.CmdInspect, nil, &in); err != nil {
		t.Fatal(err)
	}
	if in.Phase != machine.Uninitialized || in.ID == old.ID || in.Name != "" {
		t.Fatalf("after an interrupted reset: %+v", in)
	}
	for _, p := range []string{filepath.Join(dataDir, "store"), dnsSpecFile} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the reset: %v", p, err)
		}
	}
}

// TestExecOverTheSocket runs processes in a real Container through the
// exec stream: stdout and stderr arrive tagged apart, the environment is
// passed, the exit code is the process's, and an empty command or an
// unknown Container is refused naming what is wrong.
func TestExecOverTheSocket(t *testing.T) {
	to := newTestOps(t)
	id := to.createStart(t, "sh", to.Spec("sh", nil))
	c, _, _ := runDaemon(t, t.TempDir())

	run := func(req rpc.ExecRequest, stdin []byte) (stdout, stderr string, code int, err error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := c.OpenStream(ctx, rpc.Target{}, rpc.CmdExec, req)
		if err != nil {
			return "", "", 0, err
		}
		defer s.Close()
		if req.Stdin {
			if err := s.Send(rpc.StreamFrame{Data: stdin}); err != nil {
				return "", "", 0, err
			}
			if err := s.CloseSend(); err != nil {
				return "", "", 0, err
			}
		}
		code = -1
		for {
			f, err := s.Recv()
			if errors.Is(err, io.EOF) || f.Done {
				return stdout, stderr, code, nil
			}
			if err != nil {
				return stdout, stderr, code, err
			}
			var ev struct {
				Stream   string `json:"stream"`
				ExitCode *int   `json:"exit_code"`
			}
			if len(f.Event) > 0 {
				if err := json.Unmarshal(f.Event, &ev); err != nil {
					t.Fatalf("event %s: %v", f.Event, err)
				}
			}
			switch {
			case ev.ExitCode != nil:
				code = *ev.ExitCode
			case ev.Stream == "stderr":
				stderr += string(f.Data)
			default:
				stdout += string(f.Data)
			}
		}
	}

	out, errOut, code, err := run(rpc.ExecRequest{ID: id, Cmd: []string{"/testapp", "get", "http://127.0.0.1:8080/"}}, nil)
	if err != nil || code != 0 || out == "" || errOut != "" {
		t.Fatalf("get: stdout %q stderr %q code %d err %v", out, errOut, code, err)
	}
	out, errOut, code, err = run(rpc.ExecRequest{ID: id, Cmd: []string{"/testapp"}, Env: []string{"CRASH_ON_START=1", "EXIT_CODE=7"}, Stdin: true}, []byte("ignored\n"))
	if err != nil || code != 7 || out != "" || !strings.Contains(errOut, "crashing on start with exit code 7") {
		t.Fatalf("crash: stdout %q stderr %q code %d err %v", out, errOut, code, err)
	}
	_, _, _, err = run(rpc.ExecRequest{ID: id}, nil)
	if featuretest.Code(err) != rpc.CodeInvalidArgument || featuretest.Detail(err, "field") != "cmd" {
		t.Fatalf("empty cmd: %v", err)
	}
	_, _, _, err = run(rpc.ExecRequest{ID: "no-such-container-" + to.Namespace, Cmd: []string{"/testapp"}}, nil)
	if featuretest.Code(err) != rpc.CodeNotFound {
		t.Fatalf("unknown container: %v (code %q)", err, featuretest.Code(err))
	}
}
