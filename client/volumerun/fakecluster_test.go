package volumerun

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/volume"
)

// fakeCluster is Machines answering the Machine RPC commands Volume Runs
// use, each on its own socket, from in-memory state: copies go through
// the real transition table (volumecopy.Apply), Containers and the
// Serving Pointers are plain records. The entry is the first Machine.
type fakeCluster struct {
	t    *testing.T
	mu   sync.Mutex
	ms   map[string]*fakeMachine
	ptrs map[string]rpc.ServiceServing // by namespace/service
	ent  *rpc.Client
	st   *operator.Store
	seq  int
	// failSend makes a send of these snapshots fail.
	failSend map[string]bool
	// waits are the runners' waits (tests shorten them).
	waits waits
	// events are what the runners reported, in order.
	events events
	// history is what record_history received, in order.
	history []rpc.HistoryEntry
}

// events collects a Runner's events.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

// String is the events' texts, a line each.
func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	for _, ev := range e.all {
		b.WriteString(ev.Text + "\n")
	}
	return b.String()
}

// reset forgets the events so far.
func (e *events) reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = nil
}

type fakeMachine struct {
	name   string
	srv    *grpc.Server
	vols   map[string]*fakeVol
	ctrs   map[string]*fakeCtr // by id
	labels map[string]string
	images []string
	calls  []string // the commands it served, in order
	// tasks, when set, serves volume_task through the real task table
	// (volumecopy.Tasks); its Docker calls take dockerTakes each and are
	// counted in calls as "docker stop" etc.
	tasks       *volumecopy.Tasks
	dockerTakes time.Duration
}

type fakeVol struct {
	copy   volumecopy.Copy
	mounts []string // names of Containers mounting it (running or not)
	// token is a cut receive's resume token, answered from the
	// (tokenAfter+1)th inspection on: a receive still ending.
	token      string
	tokenAfter int
	inspected  int
	snaps      []string // snapshot names, oldest first; a name's GUID is "g-"+name
}

func (v *fakeVol) snapshots() []rpc.VolumeSnapshot {
	out := []rpc.VolumeSnapshot{}
	for _, n := range v.snaps {
		out = append(out, rpc.VolumeSnapshot{Name: n, GUID: "g-" + n})
	}
	return out
}

type fakeCtr struct {
	ex    rpc.ContainerExport
	state string
}

func newFakeCluster(t *testing.T, names ...string) *fakeCluster {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "fakecl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fc := &fakeCluster{t: t, ms: map[string]*fakeMachine{}, ptrs: map[string]rpc.ServiceServing{}}
	var peers []rpc.Peer
	for _, n := range names {
		peers = append(peers, rpc.Peer{ID: "id-" + n, Name: n, Address: filepath.Join(dir, n+".sock")})
	}
	for _, p := range peers {
		m := &fakeMachine{name: p.Name, vols: map[string]*fakeVol{}, ctrs: map[string]*fakeCtr{}, labels: map[string]string{volume.PoolLabel: "tank"}}
		fc.ms[p.Name] = m
		id, name := p.ID, p.Name
		srv := rpc.NewServer(rpc.Options{Local: func() (string, string) { return id, name },
			Peers: func(context.Context) ([]rpc.Peer, error) { return peers, nil },
			Dial:  func(_ context.Context, p rpc.Peer) (*rpc.Client, error) { return rpc.DialUnix(p.Address) }})
		fc.routes(srv, m)
		fc.dataRoutes(srv, m)
		lis, err := net.Listen("unix", p.Address)
		if err != nil {
			t.Fatal(err)
		}
		m.srv = srv.GRPCServer()
		go m.srv.Serve(lis) //nolint:errcheck // ends with Stop
		t.Cleanup(m.srv.Stop)
	}
	fc.ent, err = rpc.DialUnix(peers[0].Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.ent.Close() })
	fc.st, err = operator.Open(filepath.Join(t.TempDir(), "operator.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fc.st.Close() })
	return fc
}

// serveTasks has Machine name serve volume_task (an up-to-date daemon),
// each Docker call taking takes; the Machine answers busy after 20 ms.
func (fc *fakeCluster) serveTasks(name string, takes time.Duration) {
	ts := volumecopy.NewTasks()
	ts.Wait = 20 * time.Millisecond
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.ms[name].tasks, fc.ms[name].dockerTakes = ts, takes
}

// down stops Machine name answering (a Machine that does not answer).
func (fc *fakeCluster) down(name string) { fc.ms[name].srv.Stop() }

// runner is a Runner on the cluster (context "lab") reporting into
// fc.events.
func (fc *fakeCluster) runner() *Runner {
	return &Runner{Entry: fc.ent, Store: fc.st, Context: "lab", OnEvent: fc.events.add, waits: fc.waits}
}

// copies reads every Machine's copy of name, as a run does.
func (fc *fakeCluster) copies(name string) Copies {
	cp, err := ReadCopies(context.Background(), fc.ent, name)
	if err != nil {
		fc.t.Fatal(err)
	}
	return cp
}

// volume gives Machine m a copy of name.
func (fc *fakeCluster) volume(m, name string, c volumecopy.Copy) {
	fc.ms[m].vols[name] = &fakeVol{copy: c}
}

// container puts a Service Container mounting volume vol on Machine m.
func (fc *fakeCluster) container(m, name, vol, state string) string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.seq++
	id := fmt.Sprintf("c%d", fc.seq)
	spec := rpc.ContainerSpec{Image: "app:1", Namespace: "shop-production", Service: "db", DeploymentID: "dep1",
		Mounts: []rpc.MountSpec{{Type: "bind", Source: volume.MountRoot + "/" + vol, Target: "/data"}}}
	fc.ms[m].ctrs[id] = &fakeCtr{ex: rpc.ContainerExport{ID: id, Name: name, Spec: spec}, state: state}
	return id
}

func (fc *fakeCluster) routes(srv *rpc.Server, m *fakeMachine) {
	handle := func(cmd string, h func(raw json.RawMessage) (any, error)) {
		srv.Handle(rpc.Route{Command: cmd, Capability: "test." + cmd, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			m.calls = append(m.calls, cmd)
			return h(raw)
		}})
	}
	id := "id-" + m.name
	handle(rpc.CmdRecordHistory, func(raw json.RawMessage) (any, error) {
		var req rpc.RecordHistoryRequest
		if err := rpc.Decode(rpc.CmdRecordHistory, raw, &req); err != nil {
			return nil, err
		}
		fc.history = append(fc.history, req.Entry)
		return rpc.HistoryRecorded{ID: req.Entry.ID}, req.Validate()
	})
	volOf := func(name string, v *fakeVol) rpc.Volume {
		c := v.copy.View()
		return rpc.Volume{MachineID: id, Name: name, Pool: "tank", Mountpoint: volume.MountRoot + "/" + name, Copy: &c, ReadOnly: c.Role == volumecopy.Mirror,
			Snapshots: v.snapshots()}
	}
	handle(rpc.CmdListVolumes, func(json.RawMessage) (any, error) {
		out := rpc.VolumeList{MachineID: id, Pool: "tank", Volumes: []rpc.Volume{}}
		for n, v := range m.vols {
			out.Volumes = append(out.Volumes, volOf(n, v))
		}
		return out, nil
	})
	handle(rpc.CmdInspectVolume, func(raw json.RawMessage) (any, error) {
		var req rpc.VolumeRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		v, ok := m.vols[req.Name]
		if !ok {
			return nil, rpc.Errorf(rpc.CodeNotFound, "name: no volume %q on this Machine", req.Name)
		}
		out := volOf(req.Name, v)
		if v.inspected++; v.token != "" && v.inspected > v.tokenAfter {
			out.ResumeToken = v.token
		}
		return out, nil
	})
	handle(rpc.CmdSetVolumeCopy, func(raw json.RawMessage) (any, error) {
		var req rpc.SetVolumeCopyRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		v, ok := m.vols[req.Volume]
		cur := volumecopy.Copy{}
		if ok {
			cur = v.copy
		}
		f := volumecopy.Facts{Exists: ok, Busy: m.tasks.Running(req.Volume)}
		for _, c := range m.ctrs {
			if c.state == "running" && MountsVolume(&c.ex.Spec, req.Volume) {
				f.MountedBy = append(f.MountedBy, c.ex.Name)
			}
		}
		next, changed, err := volumecopy.Apply(cur, req, f, time.Now())
		if err != nil {
			return nil, err
		}
		if ok {
			v.copy = next
		}
		return rpc.VolumeCopySet{MachineID: id, Volume: req.Volume, Copy: next.View(), Changed: changed}, nil
	})
	handle(rpc.CmdRemoveVolume, func(raw json.RawMessage) (any, error) {
		var req rpc.VolumeRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		if _, ok := m.vols[req.Name]; !ok {
			return nil, rpc.Errorf(rpc.CodeNotFound, "name: no volume %q on this Machine", req.Name)
		}
		for _, c := range m.ctrs {
			if MountsVolume(&c.ex.Spec, req.Name) {
				return nil, rpc.Errorf(rpc.CodeFailedPrecond, "name: volume %q is in use", req.Name)
			}
		}
		delete(m.vols, req.Name)
		return map[string]string{"removed": req.Name, "machine_id": id}, nil
	})
	obs := func(c *fakeCtr) rpc.ContainerObservation {
		sp := c.ex.Spec
		return rpc.ContainerObservation{ID: c.ex.ID, Name: c.ex.Name, MachineID: id, Namespace: sp.Namespace, Service: sp.Service,
			Image: sp.Image, State: c.state, Ready: c.state == "running", Spec: &sp, Labels: map[string]string{rpc.LabelKind: "service"}}
	}
	find := func(ref string) (*fakeCtr, error) {
		for _, c := range m.ctrs {
			if c.ex.ID == ref || c.ex.Name == ref {
				return c, nil
			}
		}
		return nil, rpc.Errorf(rpc.CodeNotFound, "no Container %q", ref)
	}
	handle(rpc.CmdListContainers, func(json.RawMessage) (any, error) {
		out := rpc.ContainerList{MachineID: id, Labels: m.labels}
		for _, c := range m.ctrs {
			out.Containers = append(out.Containers, obs(c))
		}
		return out, nil
	})
	handle(rpc.CmdExportContainer, func(raw json.RawMessage) (any, error) {
		var req rpc.ContainerRef
		json.Unmarshal(raw, &req) //nolint:errcheck
		c, err := find(req.ID)
		if err != nil {
			return nil, err
		}
		return c.ex, nil
	})
	// Every Machine holds app:1 unless the test set its images.
	handle(rpc.CmdListImages, func(json.RawMessage) (any, error) {
		if m.images != nil {
			return rpc.ImageList{Images: []rpc.ImageInfo{{ID: "sha256:1", Tags: m.images}}}, nil
		}
		return rpc.ImageList{Images: []rpc.ImageInfo{{ID: "sha256:1", Tags: []string{"app:1"}}}}, nil
	})
	handle(rpc.CmdCreateContainer, func(raw json.RawMessage) (any, error) {
		var req rpc.CreateContainerRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		if _, err := find(req.Name); err == nil {
			return nil, rpc.Errorf(rpc.CodeConflict, "name: a Container %q exists", req.Name)
		}
		fc.seq++
		c := &fakeCtr{ex: rpc.ContainerExport{ID: fmt.Sprintf("c%d", fc.seq), Name: req.Name, Spec: req.Spec, Files: req.Files}, state: "created"}
		m.ctrs[c.ex.ID] = c
		return obs(c), nil
	})
	setState := func(ref, to string) (any, error) {
		c, err := find(ref)
		if err != nil {
			return nil, err
		}
		c.state = to
		return obs(c), nil
	}
	state := func(cmd, to string) {
		handle(cmd, func(raw json.RawMessage) (any, error) {
			var req rpc.ContainerRef
			json.Unmarshal(raw, &req) //nolint:errcheck
			return setState(req.ID, to)
		})
	}
	state(rpc.CmdStartContainer, "running")
	state(rpc.CmdStopContainer, "exited")
	handle(rpc.CmdPullImage, func(json.RawMessage) (any, error) { return rpc.PullImageResult{}, nil })
	fc.taskRoute(srv, m, setState)
	handle(rpc.CmdRemoveContainer, func(raw json.RawMessage) (any, error) {
		var req rpc.RemoveContainerRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		c, err := find(req.ID)
		if err != nil {
			return nil, err
		}
		delete(m.ctrs, c.ex.ID)
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
		out := rpc.ServingStatus{ObserverID: id}
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
}

// taskRoute serves volume_task on m while m.tasks is set: admitted
// against m's copy by the real table, the Docker call a state change
// after m.dockerTakes. It holds fc.mu only to read or change m, never
// while it waits on a task.
func (fc *fakeCluster) taskRoute(srv *rpc.Server, m *fakeMachine, setState func(ref, to string) (any, error)) {
	srv.Handle(rpc.Route{Command: rpc.CmdVolumeTask, Capability: rpc.CapVolumeTask,
		Available: func() bool { fc.mu.Lock(); defer fc.mu.Unlock(); return m.tasks != nil },
		Handler: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var req rpc.VolumeTaskRequest
			json.Unmarshal(raw, &req) //nolint:errcheck
			key := volumecopy.TaskKey{Volume: req.Volume, Gen: req.Gen, Kind: req.Kind}
			ref, to := "", ""
			switch req.Kind {
			case rpc.TaskStop:
				key.Subject, ref, to = req.Stop.ID, req.Stop.ID, "exited"
			case rpc.TaskStart:
				key.Subject, ref, to = req.Start.ID, req.Start.ID, "running"
			case rpc.TaskPull:
				key.Subject = req.Pull.Image
			}
			fc.mu.Lock()
			m.calls = append(m.calls, rpc.CmdVolumeTask)
			ts, takes := m.tasks, m.dockerTakes
			fc.mu.Unlock()
			job := volumecopy.Job{Key: key, Timeout: time.Minute, Grant: req.Kind != rpc.TaskPull, Run: func(context.Context) error {
				time.Sleep(takes)
				fc.mu.Lock()
				defer fc.mu.Unlock()
				m.calls = append(m.calls, "docker "+req.Kind)
				if ref == "" {
					return nil
				}
				_, err := setState(ref, to)
				return err
			}}
			st, err := ts.Do(ctx, job, func(start func()) error {
				fc.mu.Lock()
				defer fc.mu.Unlock()
				var cur volumecopy.Copy
				if v, ok := m.vols[req.Volume]; ok {
					cur = v.copy
				}
				if err := volumecopy.AdmitTask(cur, req.Volume, req.Gen, req.Expect); err != nil {
					return err
				}
				start()
				return nil
			})
			st.MachineID = "id-" + m.name
			return st, err
		}})
}

// pointTo sets the Serving Pointer of shop-production/db to ids on m.
func (fc *fakeCluster) pointTo(m string, ids ...string) {
	var cs []rpc.ServingContainer
	for _, id := range ids {
		cs = append(cs, rpc.ServingContainer{ID: id, MachineID: "id-" + m, Deployment: "dep1"})
	}
	k := serving.ServiceKey("shop-production", "db")
	fc.ptrs[k] = rpc.ServiceServing{Service: k, Pointer: "p0", Deployment: "dep1", Containers: cs}
}

// dataRoutes serve snapshot_volume and send_volume_to from the snapshot
// names a fakeVol records: a send lands the snapshot on the target.
func (fc *fakeCluster) dataRoutes(srv *rpc.Server, m *fakeMachine) {
	srv.Handle(rpc.Route{Command: rpc.CmdSnapshotVolume, Capability: "test." + rpc.CmdSnapshotVolume, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
		fc.mu.Lock()
		defer fc.mu.Unlock()
		m.calls = append(m.calls, rpc.CmdSnapshotVolume)
		var req rpc.SnapshotVolumeRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		v, ok := m.vols[req.Volume]
		if !ok {
			return nil, rpc.Errorf(rpc.CodeNotFound, "volume: no volume %q on this Machine", req.Volume)
		}
		v.snaps = append(v.snaps, req.Snapshot)
		c := v.copy.View()
		return rpc.Volume{Name: req.Volume, Copy: &c, Snapshots: v.snapshots()}, nil
	}})
	srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolumeTo, Capability: rpc.CapSendVolumeTo, Handler: func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
		fc.mu.Lock()
		var req rpc.SendVolumeToRequest
		json.Unmarshal(raw, &req) //nolint:errcheck
		m.calls = append(m.calls, rpc.CmdSendVolumeTo+" "+req.Snapshot+" → "+req.Target)
		t, ok := fc.ms[req.Target]
		var tv *fakeVol
		if ok {
			tv = t.vols[req.Volume]
		}
		if fc.failSend[req.Snapshot] || tv == nil {
			fc.mu.Unlock()
			return rpc.Errorf(rpc.CodeUnavailable, "send %s to %s: connection reset", req.Snapshot, req.Target)
		}
		tv.snaps = append(tv.snaps, req.Snapshot)
		c := tv.copy.View()
		got := rpc.VolumeReceived{Bytes: 100, Volume: rpc.Volume{Name: req.Volume, Copy: &c, Snapshots: tv.snapshots()}}
		fc.mu.Unlock()
		ev, _ := json.Marshal(rpc.VolumeTransfer{TargetID: "id-" + req.Target, Bytes: 100, Received: &got})
		return s.Send(rpc.StreamFrame{Event: ev})
	}})
}

// snaps gives Machine m's copy of name snapshots (after those it has).
func (fc *fakeCluster) snaps(m, name string, snaps ...string) {
	v := fc.ms[m].vols[name]
	v.snaps = append(v.snaps, snaps...)
}
