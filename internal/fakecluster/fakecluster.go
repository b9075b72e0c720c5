package fakecluster

import (
	"cmp"
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
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
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
	o     Options
	// history is the Cluster's replicated history table, by id.
	history map[string]rpc.HistoryEntry
	saved   savedState
	// leases are the entry's leases (leases.go); Renewals counts the
	// renewals it granted.
	leases   map[string]fakeLease
	renewals int
	// runs is the Cluster's volume_runs table, by key (volumeruns.go).
	runs map[string]sdkstore.Row[store.VolumeRunBody]
	// marks are the allocation history and removal marks (allocations.go).
	marks operatorMarks
	// Jobs are the stored scheduled jobs, by namespace/service, and
	// JobRuns the runs list_jobs answers for each (jobs.go); read and set
	// them with the Cluster locked.
	Jobs    map[string]rpc.JobDecl
	JobRuns map[string][]store.JobRunBody
	// VolumePolicies are the stored x-volume policies by volume
	// (put_volume_policies; jobs.go).
	VolumePolicies map[string]store.VolumePolicyBody
}

// Machine is one fake Machine. A test reads or changes its exported
// fields with the Cluster locked (Lock) while calls may be in flight.
type Machine struct {
	id, name string
	labels   map[string]string
	srv      *grpc.Server
	// Ctrs are its Containers by id.
	Ctrs map[string]*Container
	// Calls are the commands it served, in order.
	Calls []string
	// Images are the image tags it holds (nil: app:1).
	Images []string
	// Platform is the os/arch it reports with its images ("": none).
	Platform string
	// Volumes are its Docker volumes, Writers the Provisioned Volumes
	// whose Writer it holds (list_containers answers them).
	Volumes, Writers []string
	// Runs are the run_container requests it served, in order.
	Runs []rpc.RunContainerRequest
	// FailCreate makes create_container fail here; FailReset, reset.
	FailCreate, FailReset bool
	// WasReset is set by a reset.
	WasReset bool
}

// Container is one fake Container: what export_container answers, and
// its state.
type Container struct {
	rpc.ContainerExport
	State string
	// Keep marks a one-off run kept after it ends.
	Keep bool
}

// Options change what every Machine is and serves.
type Options struct {
	// Labels are every Machine's labels to begin with.
	Labels map[string]string
	// Unsupported are commands no Machine serves, as an older release
	// does not: a caller gets unsupported.
	Unsupported []string
	// Routes adds a test's own routes to each Machine's server (fc's
	// Handle serves one under its lock, as the Cluster's own are); it runs
	// before NewWith returns.
	Routes func(fc *Cluster, srv *rpc.Server, m *Machine)
	// NoVolumeRuns plays entries from before the Cluster kept Volume
	// Runs: they do not serve begin_volume_run and its kin.
	NoVolumeRuns bool
}

// New serves Machines named names, each labelled only with what a
// drain sets, until the test ends.
func New(t testing.TB, names ...string) *Cluster { return NewWith(t, Options{}, names...) }

// NewWith is New with o's labels and routes on every Machine.
func NewWith(t testing.TB, o Options, names ...string) *Cluster {
	t.Helper()
	// No local Docker: a Deploy delivers no image (Machines hold app:1).
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	dir, err := os.MkdirTemp("/tmp", "fakecl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := &Cluster{t: t, ptrs: map[string]rpc.ServiceServing{}, o: o, history: map[string]rpc.HistoryEntry{},
		saved: savedState{records: map[string]rpc.PutDeployRecordRequest{}}, leases: map[string]fakeLease{},
		Jobs: map[string]rpc.JobDecl{}, JobRuns: map[string][]store.JobRunBody{}, VolumePolicies: map[string]store.VolumePolicyBody{},
		runs:  map[string]sdkstore.Row[store.VolumeRunBody]{},
		marks: operatorMarks{removals: map[string]rpc.RemovalMark{}}}
	for _, n := range names {
		fc.peers = append(fc.peers, rpc.Peer{ID: "id-" + n, Name: n, Address: filepath.Join(dir, n+".sock")})
	}
	for _, p := range fc.peers {
		m := &Machine{id: p.ID, name: p.Name, labels: maps.Clone(o.Labels), Ctrs: map[string]*Container{}}
		if m.labels == nil {
			m.labels = map[string]string{}
		}
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
	srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdExec, Capability: "test.exec", Handler: fc.exec(m)})
	if !slices.Contains(fc.o.Unsupported, rpc.CmdRunContainer) {
		srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdRunContainer, Capability: rpc.CapRunContainer, Handler: fc.run(m)})
	}
	if fc.o.Routes != nil {
		fc.o.Routes(fc, srv, m)
	}
	lis, err := net.Listen("unix", addr)
	if err != nil {
		fc.t.Fatal(err)
	}
	m.srv = srv.GRPCServer()
	go m.srv.Serve(lis) // ends with Stop
	fc.t.Cleanup(m.srv.Stop)
}

// Down stops Machine name answering (a Machine that does not answer).
func (fc *Cluster) Down(name string) { fc.Machine(name).srv.Stop() }

// Lock holds the Cluster still: no call is served until Unlock.
func (fc *Cluster) Lock() { fc.mu.Lock() }

// Unlock lets calls be served again.
func (fc *Cluster) Unlock() { fc.mu.Unlock() }

// Handle serves cmd on m's server with h, under the Cluster's lock and
// counted in m.Calls.
func (fc *Cluster) Handle(srv *rpc.Server, m *Machine, cmd string, h func(raw json.RawMessage) (any, error)) {
	if slices.Contains(fc.o.Unsupported, cmd) {
		return
	}
	srv.Handle(rpc.Route{Command: cmd, Capability: "test." + cmd, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		m.Calls = append(m.Calls, cmd)
		return h(raw)
	}})
}

// HandleMethod is Handle for a declared command: h gets the request
// decoded as ployzd's handler gets it and answers the declared type.
func HandleMethod[Req, Resp any](fc *Cluster, srv *rpc.Server, m *Machine, method rpc.Method[Req, Resp], h func(Req) (Resp, error)) {
	typed := method.Handler(func(_ context.Context, req Req) (Resp, error) { return h(req) })
	fc.Handle(srv, m, method.Name, func(raw json.RawMessage) (any, error) { return typed(context.Background(), raw) })
}

// ID is the Machine's id ("id-" and its name).
func (m *Machine) ID() string { return m.id }

// Name is the Machine's name.
func (m *Machine) Name() string { return m.name }

// Find is the Container ref names (an id or a name); call it with the
// Cluster locked.
func (m *Machine) Find(ref string) (*Container, error) {
	for _, c := range m.Ctrs {
		if c.ID == ref || c.Name == ref {
			return c, nil
		}
	}
	return nil, rpc.Errorf(rpc.CodeNotFound, "no Container %q", ref)
}

// SetState puts the Container ref names in state to and answers its
// observation; call it with the Cluster locked.
func (fc *Cluster) SetState(m *Machine, ref, to string) (rpc.ContainerObservation, error) {
	c, err := m.Find(ref)
	if err != nil {
		return rpc.ContainerObservation{}, err
	}
	c.State = to
	return fc.obs(m, c), nil
}

// AddContainer gives m a Container named name of spec in state, as if
// created earlier, and returns its id.
func (fc *Cluster) AddContainer(m *Machine, name string, spec rpc.ContainerSpec, state string) string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.add(m, rpc.ContainerExport{Name: name, Spec: spec}, state).ID
}

// add records a Container on m under the next id; the lock is held.
func (fc *Cluster) add(m *Machine, ex rpc.ContainerExport, state string) *Container {
	fc.seq++
	ex.ID = fmt.Sprintf("c%d", fc.seq)
	c := &Container{ContainerExport: ex, State: state}
	m.Ctrs[c.ID] = c
	return c
}

// SetPointer sets the Serving Pointer of service key k.
func (fc *Cluster) SetPointer(k string, p rpc.ServiceServing) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.ptrs[k] = p
}

// Pointer is the Serving Pointer of service key k.
func (fc *Cluster) Pointer(k string) rpc.ServiceServing {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.ptrs[k]
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
		for _, c := range m.Ctrs {
			if c.State == "running" {
				out = append(out, m.name+":"+c.Spec.Service)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (fc *Cluster) obs(m *Machine, c *Container) rpc.ContainerObservation {
	sp := c.Spec
	labels := maps.Clone(sp.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[rpc.LabelKind] = cmp.Or(sp.Kind, rpc.KindService)
	if c.Keep {
		labels[rpc.LabelRunKeep] = "1"
	}
	return rpc.ContainerObservation{ID: c.ID, Name: c.Name, MachineID: m.id, Namespace: sp.Namespace, Service: sp.Service, ServiceID: sp.ServiceID,
		Deployment: sp.DeploymentID, SpecHash: sp.SpecHash, Image: sp.Image, State: c.State, Ready: c.State == "running", Spec: &sp, Labels: labels}
}

func (fc *Cluster) routes(srv *rpc.Server, m *Machine) {
	find := m.Find
	HandleMethod(fc, srv, m, rpc.ListMachines, func(rpc.None) (rpc.MachineList, error) {
		out := rpc.MachineList{ObserverID: m.id, ObserverName: m.name}
		for i, o := range fc.ms {
			// Each Machine's subnet is its place's /24 of 10.210.0.0/16.
			out.Machines = append(out.Machines, rpc.MachineView{ID: o.id, Name: o.name, Labels: maps.Clone(o.labels),
				Subnet: fmt.Sprintf("10.210.%d.0/24", i+1), Capabilities: fc.capabilities()})
		}
		return out, nil
	})
	HandleMethod(fc, srv, m, rpc.UpdateMachine, func(req rpc.UpdateMachineRequest) (rpc.Inspection, error) {
		maps.Copy(m.labels, req.LabelsAdd)
		for _, k := range req.LabelsRemove {
			delete(m.labels, k)
		}
		return rpc.Inspection{ID: m.id, Name: m.name}, nil
	})
	HandleMethod(fc, srv, m, rpc.Reset, func(rpc.None) (rpc.Inspection, error) {
		if m.FailReset {
			return rpc.Inspection{}, rpc.Errorf(rpc.CodeUnavailable, "reset: docker is not answering")
		}
		m.WasReset = true
		return rpc.Inspection{ID: m.id, Name: m.name, Phase: "resetting"}, nil
	})
	HandleMethod(fc, srv, m, rpc.ForgetMachine, func(req rpc.ForgetMachineRequest) (rpc.MachineForgotten, error) {
		fc.ms = slices.DeleteFunc(fc.ms, func(o *Machine) bool { return o.id == req.ID })
		return rpc.MachineForgotten{Forgotten: req.ID}, nil
	})
	HandleMethod(fc, srv, m, rpc.SaltSpecHashes, func(req rpc.SaltSpecHashesRequest) (rpc.SaltSpecHashesResult, error) {
		var out rpc.SaltSpecHashesResult
		for _, d := range req.Digests {
			h := fnv.New64a()
			h.Write([]byte(d))
			out.Hashes = append(out.Hashes, fmt.Sprintf("%s%016x", rpc.SaltedSpecHashPrefix, h.Sum64()))
		}
		return out, nil
	})
	// Every Machine holds app:1 unless the test set its Images.
	HandleMethod(fc, srv, m, rpc.ListImages, func(rpc.ListImagesRequest) (rpc.ImageList, error) {
		tags := m.Images
		if tags == nil {
			tags = []string{"app:1"}
		}
		return rpc.ImageList{Images: []rpc.ImageInfo{{ID: "sha256:1", Tags: tags}}, Platform: m.Platform}, nil
	})
	HandleMethod(fc, srv, m, rpc.PullImage, func(req rpc.PullImageRequest) (rpc.PullImageResult, error) {
		return rpc.PullImageResult{Image: req.Image}, nil
	})
	HandleMethod(fc, srv, m, rpc.ExportContainer, func(req rpc.ExportContainerRequest) (rpc.ContainerExport, error) {
		c, err := find(req.ID)
		if err != nil {
			return rpc.ContainerExport{}, err
		}
		return c.ContainerExport, nil
	})
	HandleMethod(fc, srv, m, rpc.ListContainers, func(req rpc.ListContainersRequest) (rpc.ContainerList, error) {
		out := rpc.ContainerList{MachineID: m.id, Labels: maps.Clone(m.labels), Volumes: m.Volumes, Writers: m.Writers}
		for _, c := range m.Ctrs {
			if c.Spec.Kind == rpc.KindRun && !req.OneOffs {
				continue // as ployzd: one-off runs only when asked
			}
			out.Containers = append(out.Containers, fc.obs(m, c))
		}
		return out, nil
	})
	HandleMethod(fc, srv, m, rpc.CreateContainer, func(req rpc.CreateContainerRequest) (rpc.ContainerObservation, error) {
		if m.FailCreate {
			return rpc.ContainerObservation{}, rpc.Errorf(rpc.CodeUnavailable, "docker: no space left on device")
		}
		if _, err := find(req.Name); err == nil {
			return rpc.ContainerObservation{}, rpc.Errorf(rpc.CodeConflict, "name: a Container %q exists", req.Name)
		}
		return fc.obs(m, fc.add(m, rpc.ContainerExport{Name: req.Name, Spec: req.Spec, Files: req.Files}, "created")), nil
	})
	HandleMethod(fc, srv, m, rpc.StartContainer, func(req rpc.ContainerRef) (rpc.ContainerObservation, error) {
		return fc.SetState(m, req.ID, "running")
	})
	HandleMethod(fc, srv, m, rpc.StopContainer, func(req rpc.StopContainerRequest) (rpc.ContainerObservation, error) {
		return fc.SetState(m, req.ID, "exited")
	})
	HandleMethod(fc, srv, m, rpc.RemoveContainer, func(req rpc.RemoveContainerRequest) (rpc.ContainerRemoved, error) {
		c, err := find(req.ID)
		if err != nil {
			return rpc.ContainerRemoved{}, err
		}
		delete(m.Ctrs, c.ID)
		return rpc.ContainerRemoved{Removed: c.ID}, nil
	})
	HandleMethod(fc, srv, m, rpc.WaitReady, func(req rpc.WaitReadyRequest) (rpc.WaitReadyResult, error) {
		c, err := find(req.ID)
		if err != nil {
			return rpc.WaitReadyResult{}, err
		}
		if c.State != "running" {
			return rpc.WaitReadyResult{Outcome: "exited", Message: c.State}, nil
		}
		return rpc.WaitReadyResult{Outcome: "ready"}, nil
	})
	HandleMethod(fc, srv, m, rpc.ReadServingStatus, func(req rpc.ServingStatusRequest) (rpc.ServingStatus, error) {
		out := rpc.ServingStatus{ObserverID: m.id}
		for _, k := range req.Services {
			if p, ok := fc.ptrs[k]; ok {
				out.Services = append(out.Services, p)
			}
		}
		return out, nil
	})
	fc.historyRoutes(srv, m)
	fc.savedStateRoutes(srv, m)
	HandleMethod(fc, srv, m, rpc.MoveServingPointer, func(req rpc.MoveServingPointerRequest) (rpc.ServingPointerMoved, error) {
		fc.seq++
		p := rpc.ServiceServing{Service: req.Service, Pointer: fmt.Sprintf("p%d", fc.seq), Deployment: req.Deployment, Containers: req.Containers}
		fc.ptrs[req.Service] = p
		return rpc.ServingPointerMoved{ID: p.Pointer, Containers: p.Containers}, nil
	})
	fc.leaseRoutes(srv, m)
	fc.jobRoutes(srv, m)
	fc.volumeRunRoutes(srv, m)
	fc.allocationRoutes(srv, m)
}

// Label is one of the Machine's labels ("" when unset).
func (m *Machine) Label(k string) (string, bool) { v, ok := m.labels[k]; return v, ok }

// ContainerIDs are the ids of every Container, sorted.
func (fc *Cluster) ContainerIDs() []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for _, m := range fc.ms {
		for id := range m.Ctrs {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// exec runs a pretend process in one of m's Containers: it writes its
// argv on stdout, echoes its stdin there, names the Container on stderr
// and exits with N for argv "exit N" (else 0).
func (fc *Cluster) exec(m *Machine) rpc.StreamHandler {
	return func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
		var req rpc.ExecRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return err
		}
		fc.mu.Lock()
		c, ok := m.Ctrs[req.ID]
		fc.mu.Unlock()
		if !ok {
			return rpc.Errorf(rpc.CodeNotFound, "no Container %q", req.ID)
		}
		stderr, _ := json.Marshal(rpc.ExecOutput{Stream: "stderr"})
		if err := s.Send(rpc.StreamFrame{Data: []byte(strings.Join(req.Cmd, " ") + "\n")}); err != nil {
			return err
		}
		for req.Stdin {
			f, err := s.Recv()
			if err != nil || f.EOF {
				break
			}
			if err := s.Send(rpc.StreamFrame{Data: f.Data}); err != nil {
				return err
			}
		}
		if err := s.Send(rpc.StreamFrame{Data: []byte("in " + c.Name + "\n"), Event: stderr}); err != nil {
			return err
		}
		code := 0
		if len(req.Cmd) == 2 && req.Cmd[0] == "exit" {
			code, _ = strconv.Atoi(req.Cmd[1])
		}
		exit, _ := json.Marshal(rpc.ExecExit{ExitCode: code})
		return s.Send(rpc.StreamFrame{Event: exit})
	}
}
