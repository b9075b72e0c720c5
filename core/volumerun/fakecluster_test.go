package volumerun

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/internal/fakecluster"
	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/volume"
)

// fakeCluster is Machines answering the Machine RPC commands Volume Runs
// use (internal/fakecluster's, plus volumes), each on its own socket,
// from in-memory state: copies go through the real transition table
// (volumecopy.Apply), Containers and the Serving Pointers are
// fakecluster's records. The entry is the first Machine.
type fakeCluster struct {
	*fakecluster.Cluster
	t  *testing.T
	ms map[string]*fakeMachine
	// failSend makes a send of these snapshots fail.
	failSend map[string]bool
	// failRollback makes rollback_volume fail after admitting it.
	failRollback bool
	// holdRollback, when set, keeps rollback_volume from answering until
	// it is closed (a Machine that admitted it and never answers).
	holdRollback chan struct{}
	// waits are the runners' waits (tests shorten them).
	waits waits
	// events are what the runners reported, in order.
	events events
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

// fakeMachine is a fakecluster Machine and the volumes it holds.
type fakeMachine struct {
	*fakecluster.Machine
	vols map[string]*fakeVol
	// tasks, when set, serves volume_task through the real task table
	// (volumecopy.Tasks); its Docker calls take dockerTakes each and are
	// counted in Calls as "docker stop" etc.
	tasks       *volumecopy.Tasks
	dockerTakes time.Duration
}

type fakeVol struct {
	copy volumecopy.Copy
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

func newFakeCluster(t *testing.T, names ...string) *fakeCluster {
	return newFakeClusterWith(t, fakecluster.Options{}, names...)
}

// newFakeClusterWith is newFakeCluster with o's other options (its
// labels and routes are the volume Machines').
func newFakeClusterWith(t *testing.T, o fakecluster.Options, names ...string) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{t: t, ms: map[string]*fakeMachine{}}
	o.Labels = map[string]string{volume.PoolLabel: "tank"}
	o.Routes = func(c *fakecluster.Cluster, srv *rpc.Server, m *fakecluster.Machine) {
		fc.Cluster = c
		fm := &fakeMachine{Machine: m, vols: map[string]*fakeVol{}}
		fc.ms[m.Name()] = fm
		fc.routes(srv, fm)
		fc.dataRoutes(srv, fm)
	}
	fakecluster.NewWith(t, o, names...)
	return fc
}

// serveTasks has Machine name serve volume_task (an up-to-date daemon),
// each Docker call taking takes; the Machine answers busy after 20 ms.
func (fc *fakeCluster) serveTasks(name string, takes time.Duration) {
	ts := volumecopy.NewTasks()
	ts.Wait = 20 * time.Millisecond
	fc.Lock()
	defer fc.Unlock()
	fc.ms[name].tasks, fc.ms[name].dockerTakes = ts, takes
}

// down stops Machine name answering (a Machine that does not answer).
func (fc *fakeCluster) down(name string) { fc.Down(name) }

// runner is a Runner on the cluster (context "lab") reporting into
// fc.events.
func (fc *fakeCluster) runner() *Runner {
	rn := New(fc.Entry, fc.Store, "lab", operator.Operator{}, fc.events.add)
	rn.waits = fc.waits
	return rn
}

// copies reads every Machine's copy of name, as a run does.
func (fc *fakeCluster) copies(name string) Copies {
	cp, err := ReadCopies(context.Background(), fc.Entry, name)
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
	spec := rpc.ContainerSpec{Image: "app:1", Namespace: "shop-production", Service: "db", DeploymentID: "dep1",
		Mounts: []rpc.MountSpec{{Type: "bind", Source: volume.MountRoot + "/" + vol, Target: "/data"}}}
	return fc.AddContainer(fc.ms[m].Machine, name, spec, state)
}

func (fc *fakeCluster) routes(srv *rpc.Server, m *fakeMachine) {
	id := m.ID()
	volOf := func(name string, v *fakeVol) rpc.Volume {
		c := v.copy.View()
		return rpc.Volume{MachineID: id, Name: name, Pool: "tank", Mountpoint: volume.MountRoot + "/" + name, Copy: &c, ReadOnly: c.Role == volumecopy.Mirror,
			Snapshots: v.snapshots()}
	}
	fakecluster.HandleMethod(fc.Cluster, srv, m.Machine, rpc.ListVolumes, func(rpc.None) (rpc.VolumeList, error) {
		out := rpc.VolumeList{MachineID: id, Pool: "tank", Volumes: []rpc.Volume{}}
		for n, v := range m.vols {
			out.Volumes = append(out.Volumes, volOf(n, v))
		}
		return out, nil
	})
	fakecluster.HandleMethod(fc.Cluster, srv, m.Machine, rpc.InspectVolume, func(req rpc.VolumeRequest) (rpc.Volume, error) {
		v, ok := m.vols[req.Name]
		if !ok {
			return rpc.Volume{}, rpc.Errorf(rpc.CodeNotFound, "name: no volume %q on this Machine", req.Name)
		}
		out := volOf(req.Name, v)
		if v.inspected++; v.token != "" && v.inspected > v.tokenAfter {
			out.ResumeToken = v.token
		}
		return out, nil
	})
	fakecluster.HandleMethod(fc.Cluster, srv, m.Machine, rpc.SetVolumeCopy, func(req rpc.SetVolumeCopyRequest) (rpc.VolumeCopySet, error) {
		v, ok := m.vols[req.Volume]
		cur := volumecopy.Copy{}
		if ok {
			cur = v.copy
		}
		f := volumecopy.Facts{Exists: ok, Busy: m.tasks.Running(req.Volume)}
		for _, c := range m.Ctrs {
			if c.State == "running" && MountsVolume(&c.Spec, req.Volume) {
				f.MountedBy = append(f.MountedBy, c.Name)
			}
		}
		next, changed, err := volumecopy.Apply(cur, req, f, time.Now())
		if err != nil {
			return rpc.VolumeCopySet{}, err
		}
		if ok {
			v.copy = next
		}
		return rpc.VolumeCopySet{MachineID: id, Volume: req.Volume, Copy: next.View(), Changed: changed}, nil
	})
	fakecluster.HandleMethod(fc.Cluster, srv, m.Machine, rpc.RemoveVolume, func(req rpc.VolumeRequest) (rpc.VolumeRemoved, error) {
		if _, ok := m.vols[req.Name]; !ok {
			return rpc.VolumeRemoved{}, rpc.Errorf(rpc.CodeNotFound, "name: no volume %q on this Machine", req.Name)
		}
		for _, c := range m.Ctrs {
			if MountsVolume(&c.Spec, req.Name) {
				return rpc.VolumeRemoved{}, rpc.Errorf(rpc.CodeFailedPrecond, "name: volume %q is in use", req.Name)
			}
		}
		delete(m.vols, req.Name)
		return rpc.VolumeRemoved{MachineID: id, Removed: req.Name}, nil
	})
	fc.taskRoute(srv, m)
	fc.rollbackRoute(srv, m)
}

// taskRoute serves volume_task on m while m.tasks is set: admitted
// against m's copy by the real table, the Docker call a state change
// after m.dockerTakes. It holds the Cluster's lock only to read or change m, never
// while it waits on a task.
func (fc *fakeCluster) taskRoute(srv *rpc.Server, m *fakeMachine) {
	srv.Handle(rpc.Route{Command: rpc.CmdVolumeTask, Capability: rpc.CapVolumeTask,
		Available: func() bool { fc.Lock(); defer fc.Unlock(); return m.tasks != nil },
		Handler: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var req rpc.VolumeTaskRequest
			json.Unmarshal(raw, &req)
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
			fc.Lock()
			m.Calls = append(m.Calls, rpc.CmdVolumeTask)
			ts, takes := m.tasks, m.dockerTakes
			fc.Unlock()
			job := volumecopy.Job{Key: key, Timeout: time.Minute, Grant: req.Kind != rpc.TaskPull, Run: func(context.Context) error {
				time.Sleep(takes)
				fc.Lock()
				defer fc.Unlock()
				m.Calls = append(m.Calls, "docker "+req.Kind)
				if ref == "" {
					return nil
				}
				_, err := fc.SetState(m.Machine, ref, to)
				return err
			}}
			st, err := ts.Do(ctx, job, func(start func()) error {
				fc.Lock()
				defer fc.Unlock()
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
			st.MachineID = m.ID()
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
	fc.SetPointer(k, rpc.ServiceServing{Service: k, Pointer: "p0", Deployment: "dep1", Containers: cs})
}

// dataRoutes serve snapshot_volume and send_volume_to from the snapshot
// names a fakeVol records: a send lands the snapshot on the target.
func (fc *fakeCluster) dataRoutes(srv *rpc.Server, m *fakeMachine) {
	srv.Handle(rpc.Route{Command: rpc.CmdSnapshotVolume, Capability: "test." + rpc.CmdSnapshotVolume, Handler: func(_ context.Context, raw json.RawMessage) (any, error) {
		fc.Lock()
		defer fc.Unlock()
		m.Calls = append(m.Calls, rpc.CmdSnapshotVolume)
		var req rpc.SnapshotVolumeRequest
		json.Unmarshal(raw, &req)
		v, ok := m.vols[req.Volume]
		if !ok {
			return nil, rpc.Errorf(rpc.CodeNotFound, "volume: no volume %q on this Machine", req.Volume)
		}
		v.snaps = append(v.snaps, req.Snapshot)
		c := v.copy.View()
		return rpc.Volume{Name: req.Volume, Copy: &c, Snapshots: v.snapshots()}, nil
	}})
	srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolumeTo, Capability: rpc.CapSendVolumeTo, Handler: func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
		fc.Lock()
		var req rpc.SendVolumeToRequest
		json.Unmarshal(raw, &req)
		m.Calls = append(m.Calls, rpc.CmdSendVolumeTo+" "+req.Snapshot+" → "+req.Target)
		t, ok := fc.ms[req.Target]
		var tv *fakeVol
		if ok {
			tv = t.vols[req.Volume]
		}
		if fc.failSend[req.Snapshot] || tv == nil {
			fc.Unlock()
			return rpc.Errorf(rpc.CodeUnavailable, "send %s to %s: connection reset", req.Snapshot, req.Target)
		}
		tv.snaps = append(tv.snaps, req.Snapshot)
		c := tv.copy.View()
		got := rpc.VolumeReceived{Bytes: 100, Volume: rpc.Volume{Name: req.Volume, Copy: &c, Snapshots: tv.snapshots()}}
		fc.Unlock()
		ev, _ := json.Marshal(rpc.VolumeTransfer{TargetID: "id-" + req.Target, Bytes: 100, Received: &got})
		return s.Send(rpc.StreamFrame{Event: ev})
	}})
}

// snaps gives Machine m's copy of name snapshots (after those it has).
func (fc *fakeCluster) snaps(m, name string, snaps ...string) {
	v := fc.ms[m].vols[name]
	v.snaps = append(v.snaps, snaps...)
}
