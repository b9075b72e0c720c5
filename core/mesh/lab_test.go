//go:build linux

package mesh

// The lab: two network namespaces joined by a veth pair, each running a Mesh
// in a child process (this test binary re-executed under `ip netns exec`), so
// every socket, TUN device and netlink call of a Mesh lives in its namespace
// exactly as in a daemon. The parent talks to children over stdin/stdout and
// opens its own test sockets inside a namespace from a thread that setns'd.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/internal/prereq"
)

const childEnv = "PLOYZ_MESH_CHILD"

// Ports the child serves on every address: an echo server for latency and
// connectivity, and a sink that answers with the byte count for throughput.
const (
	echoPort = 7000
	sinkPort = 7001
)

// labSkip skips unless the host can build the lab.
func labSkip(tb testing.TB) {
	tb.Helper()
	prereq.Root(tb, "the mesh lab's network namespaces and TUN")
	prereq.File(tb, "/dev/net/tun")
	prereq.Command(tb, "ip")
}

// lab is two namespaces A (10.99.0.1) and B (10.99.0.2) on one veth.
type lab struct {
	tb     testing.TB
	id     string
	nsA    string
	nsB    string
	vethA  netip.Addr
	vethB  netip.Addr
	stateA string // endpoint memory file of A
}

func newLab(tb testing.TB) *lab {
	labSkip(tb)
	b := make([]byte, 3)
	rand.Read(b)
	id := hex.EncodeToString(b)
	l := &lab{tb: tb, id: id, nsA: "pzm-a-" + id, nsB: "pzm-b-" + id,
		vethA: netip.MustParseAddr("10.99.0.1"), vethB: netip.MustParseAddr("10.99.0.2"),
		stateA: filepath.Join(tb.TempDir(), "endpoints.json")}
	// Deleting the namespaces removes the veth and anything left inside.
	tb.Cleanup(func() {
		exec.Command("ip", "netns", "del", l.nsA).Run()
		exec.Command("ip", "netns", "del", l.nsB).Run()
	})
	l.ip("netns", "add", l.nsA)
	l.ip("netns", "add", l.nsB)
	l.ip("link", "add", "pzva"+id, "netns", l.nsA, "type", "veth", "peer", "name", "pzvb"+id, "netns", l.nsB)
	for _, s := range []struct{ ns, dev, addr string }{{l.nsA, "pzva" + id, "10.99.0.1/24"}, {l.nsB, "pzvb" + id, "10.99.0.2/24"}} {
		l.ip("-n", s.ns, "addr", "add", s.addr, "dev", s.dev)
		l.ip("-n", s.ns, "link", "set", s.dev, "up")
		l.ip("-n", s.ns, "link", "set", "lo", "up")
	}
	return l
}

func (l *lab) ip(args ...string) {
	l.tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.tb.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// childSpec configures one child Mesh.
type childSpec struct {
	Iface     string
	Port      int
	Subnet    netip.Prefix
	KeyFile   string
	StateFile string
	Timeout   time.Duration
	NoServers bool // another child in the namespace already serves the test ports
}

// hello is the child's first line: what the parent needs to make it a peer.
type hello struct {
	PublicKey wgtypes.Key
	Mgmt      netip.Addr
	Gateway   netip.Addr
	Kind      Kind
	Error     string
}

type request struct {
	Op    string
	Peers []Peer
}

type reply struct {
	Status Status
	Error  string
}

// child is a running Mesh process in a namespace.
type child struct {
	tb    testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	hello hello
}

func (l *lab) start(tb testing.TB, ns string, spec childSpec) *child {
	tb.Helper()
	c, errMsg := l.tryStart(tb, ns, spec)
	if errMsg != "" {
		tb.Fatalf("child %s in %s: %s", spec.Iface, ns, errMsg)
	}
	return c
}

// tryStart starts a child and returns the error its Up reported, if any.
func (l *lab) tryStart(tb testing.TB, ns string, spec childSpec) (*child, string) {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	spec.KeyFile = filepath.Join(filepath.Dir(l.stateA), spec.Iface+".key")
	js, _ := json.Marshal(spec)
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	logf, err := os.Create(filepath.Join(tb.TempDir(), spec.Iface+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = logf
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start child in %s: %v", ns, err)
	}
	c := &child{tb: tb, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<20), 1<<20)
	tb.Cleanup(func() {
		c.stop()
		if tb.Failed() {
			b, _ := os.ReadFile(logf.Name())
			tb.Logf("child %s log:\n%s", spec.Iface, b)
		}
	})
	if !c.out.Scan() {
		tb.Fatalf("child in %s: no hello: %v", ns, c.out.Err())
	}
	if err := json.Unmarshal(c.out.Bytes(), &c.hello); err != nil {
		tb.Fatalf("child in %s: hello %q: %v", ns, c.out.Bytes(), err)
	}
	return c, c.hello.Error
}

func (c *child) call(req request) Status {
	c.tb.Helper()
	js, _ := json.Marshal(req)
	if _, err := c.in.Write(append(js, '\n')); err != nil {
		c.tb.Fatalf("child %s: %v", req.Op, err)
	}
	if !c.out.Scan() {
		c.tb.Fatalf("child %s: no reply: %v", req.Op, c.out.Err())
	}
	var r reply
	if err := json.Unmarshal(c.out.Bytes(), &r); err != nil || r.Error != "" {
		c.tb.Fatalf("child %s: %s %v", req.Op, r.Error, err)
	}
	return r.Status
}

// stop asks the child to take its device down, then makes sure it is gone.
func (c *child) stop() {
	if c.cmd.ProcessState != nil {
		return
	}
	c.in.Close() // EOF: the child runs Down and exits
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// dialIn opens a connection from inside namespace ns. The dialing goroutine
// stays locked to its thread and exits without unlocking, so the runtime
// discards the thread rather than reuse it in the wrong namespace.
func dialIn(ns, network, addr string) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ns)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			ch <- res{nil, err}
			return
		}
		c, err := net.DialTimeout(network, addr, 3*time.Second)
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// TestMain turns the binary into a child Mesh when re-executed by the lab.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

func runChild(specJSON string) int {
	var spec childSpec
	enc := json.NewEncoder(os.Stdout)
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		enc.Encode(hello{Error: err.Error()})
		return 1
	}
	fail := func(err error) int { enc.Encode(hello{Error: err.Error()}); return 1 }
	key, err := LoadOrCreateKey(spec.KeyFile)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := Up(ctx, Config{Interface: spec.Iface, ListenPort: spec.Port, PrivateKey: key, Subnet: spec.Subnet,
		EndpointStatePath: spec.StateFile, HandshakeTimeout: spec.Timeout, PollInterval: 200 * time.Millisecond,
		Userspace: true, Logger: hclog.New(&hclog.LoggerOptions{Output: os.Stderr, Level: hclog.Debug})})
	if err != nil {
		return fail(err)
	}
	for _, port := range []int{echoPort, sinkPort} {
		if spec.NoServers {
			break
		}
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			m.Down()
			return fail(err)
		}
		go serve(ln, port == sinkPort)
	}
	go m.Run(ctx)
	enc.Encode(hello{PublicKey: m.PublicKey(), Mgmt: m.ManagementIP(), Gateway: m.Gateway(), Kind: m.Kind()})
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var req request
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			r.Error = err.Error()
		} else if req.Op == "peers" {
			if err := m.SetPeers(req.Peers); err != nil {
				r.Error = err.Error()
			}
		} else if r.Status, err = m.Status(); err != nil {
			r.Error = err.Error()
		}
		enc.Encode(r)
	}
	cancel()
	if err := m.Down(); err != nil {
		fmt.Fprintln(os.Stderr, "down:", err)
		return 1
	}
	return 0
}

// serve echoes, or (sink) counts bytes until EOF and answers the count.
func serve(ln net.Listener, sink bool) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			if !sink {
				io.Copy(c, c)
				return
			}
			n, _ := io.Copy(io.Discard, c)
			fmt.Fprintf(c, "%d\n", n)
		}()
	}
}
