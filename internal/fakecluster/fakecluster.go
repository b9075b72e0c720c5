package fakecluster

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// Cluster is Machines answering, from in-memory records, the Machine
// RPC commands a Deploy, a drain and the dashboard's reads use, each on
// its own socket; the entry is the first Machine. The operator library
// runs against it unchanged: the deploy engine's real planner and
// executor drive it.
type Cluster struct {
	// Store is an operator store of its own; Entry a client of the first
	// Machine.
	Store *operator.Store
	Entry *rpc.Client

	t     testing.TB
	mu    sync.Mutex
	ms    []*Machine
	ptrs  map[string]rpc.ServiceServing
	seq   int
	peers []rpc.Peer
	// leases are the entry's leases (leases.go); Renewals counts the
	// renewals it granted.
	leases   map[string]fakeLease
	renewals int
}

// Machine is one fake Machine.
type Machine struct {
	id, name string
	labels   map[string]string
	ctrs     map[string]*fakeCtr
	// FailCreate makes create_container fail here; FailReset, reset.
	FailCreate, FailReset bool
	// WasReset is set by a reset.
	WasReset bool
}

type fakeCtr struct {
	id, name string
	spec     rpc.ContainerSpec
	state    string
}

// New serves Machines named names, each labelled only with what a
// drain sets, until the test ends.
func New(t testing.TB, names ...string) *Cluster {
	t.Helper()
	// No local Docker: a Deploy delivers no image (Machines hold app:1).
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	dir, err := os.MkdirTemp("/tmp", "fakecl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := &Cluster{t: t, ptrs: map[string]rpc.ServiceServing{}, leases: map[string]fakeLease{}}
	for _, n := range names {
		fc.peers = append(fc.peers, rpc.Peer{ID: "id-" + n, Name: n, Address: filepath.Join(dir, n+".sock")})
	}
	for _, p := range fc.peers {
		m := &Machine{id: p.ID, name: p.Name, labels: map[string]string{}, ctrs: map[string]*fakeCtr{}}
		fc.ms = append(fc.ms, m)
		fc.serve(m, p.Address)
	}
	if fc.Entry, err = rpc.DialUnix(fc.peers[0].Address); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Entry.Close() })
	if fc.Store, err = operator.Open(filepath.Join(t.TempDir(), "operator.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.Store.Close() })
	return fc
}

func (fc *Cluster) serve(m *Machine, addr string) {
	srv := rpc.NewServer(rpc.Options{Local: func() (string, string) { return m.id, m.name },
		Peers: func(context.Context) ([]rpc.Peer, error) { return fc.peers, nil },
		Dial:  func(_ context.Context, p rpc.Peer) (*rpc.Client, error) { return rpc.DialUnix(p.Address) }})
	fc.routes(srv, m)
	lis, err := net.Listen("unix", addr)
	if err != nil {
		fc.t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(lis) //nolint:errcheck // ends with Stop
	fc.t.Cleanup(g.Stop)
}

// EntryURL is the entry's connection URL (for --connect).
func (fc *Cluster) EntryURL() string { return "unix://" + fc.peers[0].Address }

// Machine is the Machine named name.
func (fc *Cluster) Machine(name string) *Machine {
	for _, m := range fc.ms {
		if m.name == name {
			return m
		}
	}
	fc.t.Fatalf("no Machine %s", name)
	return nil
}

// Running lists "machine:service" of every running Container, sorted.
func (fc *Cluster) Running() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for _, m := range fc.ms {
		for _, c := range m.ctrs {
			if c.state == "running" {
				out = append(out, m.name+":"+c.spec.Service)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (fc *Cluster) obs(m *Machine, c *fakeCtr) rpc.ContainerObservation {
	sp := c.spec
	labels := maps.Clone(sp.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[rpc.LabelKind] = "service"
	return rpc.ContainerObservation{ID: c.id, Name: c.name, MachineID: m.id, Namespace: sp.Namespace, Service: sp.Service, ServiceID: sp.ServiceID,
		Deployment: sp.DeploymentID, SpecHash: sp.SpecHash, Image: sp.Image, State: c.state, Ready: c.state == "running", Spec: &sp, Labels: labels}
}

func (fc *Cluster) routes(srv *rpc.Server, m *Machine) {
	handle := func(cmd string, h func(raw json.RawMessage) (any, error)) {
		srv.Handle(rpc.Route{Command: cmd, Capability: "test." + cmd, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return h(raw)
		}})
	}
	find := func(ref string) (*fakeCtr, error) {
		for _, c := range m.ctrs {
			if c.id == ref || c.name == ref {
				return c, nil
			}
		}
		return nil, rpc.Errorf(rpc.CodeNotFound, "no Container %q", ref)
	}
	handle(rpc.CmdListMachines, func(json.RawMessage) (any, error) {
		out := rpc.MachineList{ObserverID: m.id, ObserverName: m.name}
		for _, o := range fc.ms {
			out.Machines = append(out.Machines, rpc.MachineView{ID: o.id, Name: o.name, Labels: maps.Clone(o.labels)})
		}
		return out, nil
	})
	handle(rpc.CmdUpdateMachine, func(raw json.RawMessage) (any, error) {
		var req rpc.UpdateMachineRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		maps.Copy(m.labels, req.LabelsAdd)
		for _, k := range req.LabelsRemove {
			delete(m.labels, k)
		}
		return rpc.Inspection{ID: m.id, Name: m.name}, nil
	})
	handle(rpc.CmdReset, func(json.RawMessage) (any, error) {
		if m.FailReset {
			return nil, rpc.Errorf(rpc.CodeUnavailable, "reset: docker is not answering")
		}
		m.WasReset = true
		return nil, nil
	})
	handle(rpc.CmdForgetMachine, func(raw json.RawMessage) (any, error) {
		var req rpc.ForgetMachineRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		fc.ms = slices.DeleteFunc(fc.ms, func(o *Machine) bool { return o.id == req.ID })
		return nil, nil
	})
	handle(rpc.CmdSaltSpecHashes, func(raw json.RawMessage) (any, error) {
		var req rpc.SaltSpecHashesRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		var out rpc.SaltSpecHashesResult
		for _, d := range req.Digests {
			h := fnv.New64a()
			h.Write([]byte(d))
			out.Hashes = append(out.Hashes, fmt.Sprintf("%s%016x", rpc.SaltedSpecHashPrefix, h.Sum64()))
		}
		return out, nil
	})
	handle(rpc.CmdListImages, func(json.RawMessage) (any, error) {
		return rpc.ImageList{Images: []rpc.ImageInfo{{ID: "sha256:1", Tags: []string{"app:1"}}}}, nil
	})
	handle(rpc.CmdListContainers, func(json.RawMessage) (any, error) {
		out := rpc.ContainerList{MachineID: m.id, Labels: maps.Clone(m.labels)}
		for _, c := range m.ctrs {
			out.Containers = append(out.Containers, fc.obs(m, c))
		}
		return out, nil
	})
	handle(rpc.CmdCreateContainer, func(raw json.RawMessage) (any, error) {
		var req rpc.CreateContainerRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		if m.FailCreate {
			return nil, rpc.Errorf(rpc.CodeUnavailable, "docker: no space left on device")
		}
		if _, err := find(req.Name); err == nil {
			return nil, rpc.Errorf(rpc.CodeConflict, "name: a Container %q exists", req.Name)
		}
		fc.seq++
		c := &fakeCtr{id: fmt.Sprintf("c%d", fc.seq), name: req.Name, spec: req.Spec, state: "created"}
		m.ctrs[c.id] = c
		return fc.obs(m, c), nil
	})
	state := func(cmd, to string) {
		handle(cmd, func(raw json.RawMessage) (any, error) {
			var req rpc.ContainerRef
			json.Unmarshal(raw, &req) //nolint:errcheck
			c, err := find(req.ID)
			if err != nil {
				return nil, err
			}
			c.state = to
			return fc.obs(m, c), nil
		})
	}
	state(rpc.CmdStartContainer, "running")
	state(rpc.CmdStopContainer, "exited")
	handle(rpc.CmdRemoveContainer, func(raw json.RawMessage) (any, error) {
		var req rpc.RemoveContainerRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		c, err := find(req.ID)
		if err != nil {
			return nil, err
		}
		delete(m.ctrs, c.id)
		return nil, nil
	})
	handle(rpc.CmdWaitReady, func(raw json.RawMessage) (any, error) {
		var req rpc.WaitReadyRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		c, err := find(req.ID)
		if err != nil {
			return nil, err
		}
		if c.state != "running" {
			return rpc.WaitReadyResult{Outcome: "exited", Message: c.state}, nil
		}
		return rpc.WaitReadyResult{Outcome: "ready"}, nil
	})
	handle(rpc.CmdServingStatus, func(raw json.RawMessage) (any, error) {
		var req rpc.ServingStatusRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		out := rpc.ServingStatus{ObserverID: m.id}
		for _, k := range req.Services {
			if p, ok := fc.ptrs[k]; ok {
				out.Services = append(out.Services, p)
			}
		}
		return out, nil
	})
	handle(rpc.CmdMoveServingPointer, func(raw json.RawMessage) (any, error) {
		var req rpc.MoveServingPointerRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		fc.seq++
		p := rpc.ServiceServing{Service: req.Service, Pointer: fmt.Sprintf("p%d", fc.seq), Deployment: req.Deployment, Containers: req.Containers}
		fc.ptrs[req.Service] = p
		return rpc.ServingPointerMoved{ID: p.Pointer, Containers: p.Containers}, nil
	})
	fc.leaseRoutes(handle)
}

// Label is one of the Machine's labels ("" when unset).
func (m *Machine) Label(k string) (string, bool) { v, ok := m.labels[k]; return v, ok }

// ContainerIDs are the ids of every Container, sorted.
func (fc *Cluster) ContainerIDs() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for _, m := range fc.ms {
		for id := range m.ctrs {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}
