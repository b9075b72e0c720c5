package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	sdkstore "github.com/ployz/ployz/sdk/store"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"
	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/core/volumesend"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// VolumePlugin is the volume plugin's name.
const VolumePlugin = "volume-zfs"

// pluginStartWait bounds how long checking a pool label waits for the
// volume plugin to serve.
const pluginStartWait = 90 * time.Second

// Host is what the feature needs of the daemon.
type Host interface {
	feature.StoreHost
	// Machine is this Machine's record (its ID, name, phase and labels).
	Machine() machine.Record
	// Plugins is the plugin host; nil while there is none.
	Plugins() feature.Plugins
	// Docker is this Machine's Docker client; nil while it has none.
	Docker() client.APIClient
	// Peers lists the Machines this one observes, itself included.
	Peers(ctx context.Context) ([]rpc.Peer, error)
	// DialPeer opens Machine RPC to a peer over the mesh.
	DialPeer(ctx context.Context, p rpc.Peer) (*rpc.Client, error)
	// DataDir is the daemon's data directory (the copy records' home).
	DataDir() string
	// VolumePort is the volume transport's port on every Machine.
	VolumePort() int
	// TaskJob is the Container step a volume_task names, through the same
	// checks as the Container commands.
	TaskJob(req rpc.VolumeTaskRequest) (volumecopy.Job, error)
	// WatchStore follows queries on this Machine's store until ctx ends.
	WatchStore(ctx context.Context, queries ...string) *sdkstore.Watch
	// Socket is this Machine's local Machine RPC socket: the scheduled
	// Sync drives its Volume Run through it, as an operator's entry.
	Socket() string
}

// Feature serves the volume commands and runs the protect loop; it owns
// this Machine's volume copy records and Volume Run tasks.
type Feature struct {
	host Host
	log  hclog.Logger
	// tasks are the Volume Runs' Container steps in flight or recently
	// answered (tasks.go).
	tasks *volumecopy.Tasks
	// copies are this Machine's volume copies (copies.go).
	copies   *volumecopy.Store
	copiesMu sync.Mutex // guards opening copies
	// protectOutcomes is what the protect loop counted and saw of the
	// protected volumes whose Writer is here (the metrics plugin's).
	protectOutcomes volprotect.Outcomes
	// mirror schedules the protected volumes' Syncs (mirror.go).
	mirror   *volprotect.Mirrorer
	mirrorMu sync.Mutex
}

// New returns the feature over host; its tasks run under base.
func New(ctx context.Context, host Host, log hclog.Logger) *Feature {
	f := &Feature{host: host, log: log, tasks: volumecopy.NewTasks()}
	f.tasks.Base = ctx
	f.tasks.Ended = f.taskEnded
	return f
}

// ProtectOutcomes is what the protect loop counted, for the metrics
// plugin.
func (f *Feature) ProtectOutcomes() *volprotect.Outcomes { return &f.protectOutcomes }

// Spec is volume-zfs's spec: the pool the Machine's ployz.zfs.pool label
// names (none without it).
func (f *Feature) Spec() ([]byte, error) {
	rec := f.host.Machine()
	return json.Marshal(volume.SpecFromLabels(rec.ID, rec.Labels))
}

// plugins is the plugin host, nil while there is none.
func (f *Feature) plugins() feature.Plugins { return f.host.Plugins() }

// available is whether a healthy volume plugin serves capability.
func (f *Feature) available(capability string) bool {
	p := f.plugins()
	return p != nil && p.Available(capability)
}

// CheckPoolLabel refuses a ployz.zfs.pool label value that is not a pool
// name, or names a pool this Machine does not have (asked of the volume
// plugin), before anything changes. field is how the request names it.
func (f *Feature) CheckPoolLabel(ctx context.Context, field string, labels map[string]string) error {
	pool, ok := labels[volume.PoolLabel]
	if !ok {
		return nil
	}
	if err := volume.ValidPool(pool); err != nil {
		return rpc.InvalidField(field, "%v", err)
	}
	// A Machine being enrolled has just started ployzd, and the plugin
	// host starts its plugins beside the first RPCs: give it a moment.
	for wait := time.Now().Add(pluginStartWait); f.plugins() != nil && !f.plugins().Available(volume.CapCreate) && time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !f.available(volume.CapCreate) {
		return rpc.Errorf(rpc.CodeUnavailable, "%s: cannot check pool %q: the volume plugin is not serving %s on this Machine (see `ployz machine inspect`)",
			field, pool, volume.CapCreate).With("capability", volume.CapCreate).With("field", field)
	}
	err := f.plugins().Call(ctx, volume.CapCreate, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := volumev1.NewVolumeClient(conn).Pool(ctx, &volumev1.PoolRequest{Pool: pool})
		return err
	})
	if err != nil {
		if c := status.Code(err); c == codes.FailedPrecondition || c == codes.InvalidArgument {
			return rpc.InvalidField(field, "%s", strings.TrimPrefix(status.Convert(err).Message(), "pool: "))
		}
		return volumeErr(err, volume.CapCreate)
	}
	return nil
}

// Routes are the volume commands: the plugin's, each advertised while a
// healthy plugin serves its capability, and ployzd's own over them.
func (f *Feature) Routes() []rpc.Route {
	avail := func(capability string) func() bool {
		return func() bool { return f.available(capability) }
	}
	routes := []rpc.Route{
		rpc.Bind(rpc.CreateVolume, f.createVolume),
		rpc.Bind(rpc.RemoveVolume, f.removeVolume),
		rpc.Bind(rpc.ListVolumes, f.listVolumes),
		rpc.Bind(rpc.InspectVolume, f.inspectVolume),
		rpc.Bind(rpc.SnapshotVolume, f.snapshotVolume),
	}
	for i := range routes {
		routes[i].Available = avail(routes[i].Capability)
	}
	// set_volume_copy is ployzd's own (copies.go), served while the
	// plugin answers whether the volume is here.
	copySet := rpc.Bind(rpc.SetVolumeCopy, f.setVolumeCopy)
	copySet.Available = avail(volume.CapInspect)
	// volume_task is ployzd's own too (tasks.go): Docker runs it, the
	// copy records admit it.
	task := rpc.Bind(rpc.VolumeTask, f.volumeTask)
	task.Available = func() bool { return f.host.Docker() != nil }
	routes = append(routes, copySet, task)
	// A stream is catalogued as always served; advertise it only while
	// the plugin is healthy (as tail_logs). The daemon registers these
	// after the streams.
	for _, s := range f.streams() {
		cmd := s.route.Command
		routes = append(routes, rpc.Route{Command: cmd, Capability: s.route.Capability, Available: avail(s.plugin),
			Handler: func(context.Context, json.RawMessage) (any, error) {
				return nil, rpc.Errorf(rpc.CodeInvalidArgument, "%s is a streaming command: use Stream", cmd)
			}})
	}
	return slices.Concat(routes, f.runRoutes(), f.policyRoutes(), f.snapshotRoutes())
}

// Streams are the streaming volume commands.
func (f *Feature) Streams() []rpc.StreamRoute {
	var out []rpc.StreamRoute
	for _, s := range f.streams() {
		out = append(out, s.route)
	}
	return out
}

// streams are the streaming commands with the plugin capability each
// needs.
func (f *Feature) streams() []struct {
	route  rpc.StreamRoute
	plugin string
} {
	return []struct {
		route  rpc.StreamRoute
		plugin string
	}{
		{rpc.BindStream(rpc.SendVolume, f.sendVolume), volume.CapSend},
		{rpc.BindStream(rpc.ReceiveVolume, f.receiveVolume), volume.CapReceive},
		// ployzd's own, over the plugin's send; a Machine advertising it
		// also serves the volume transport (VolumePort) as a target.
		{rpc.BindStream(rpc.SendVolumeTo, f.sendVolumeTo), volume.CapSend},
	}
}

// volumeErr turns a volume plugin's failure into a Machine RPC error: its
// argument errors name their field ("name: ..."), a clash is a conflict,
// a missing volume not_found, no pool a failed precondition naming the
// label; a refusal keeps its capability.
func volumeErr(err error, capability string) error {
	if _, ok := pluginhost.CapabilityFromError(err); ok {
		return feature.PluginErr(err, capability)
	}
	st := status.Convert(err)
	msg := st.Message()
	field, _, _ := strings.Cut(msg, ": ")
	if strings.ContainsAny(field, " \"") {
		field = ""
	}
	var e *rpc.Error
	switch st.Code() {
	case codes.InvalidArgument:
		e = rpc.Errorf(rpc.CodeInvalidArgument, "%s", msg)
	case codes.NotFound:
		e = rpc.Errorf(rpc.CodeNotFound, "%s", msg)
	case codes.AlreadyExists:
		e = rpc.Errorf(rpc.CodeConflict, "%s", msg)
	case codes.FailedPrecondition:
		e = rpc.Errorf(rpc.CodeFailedPrecond, "%s", msg)
		if strings.Contains(msg, volume.PoolLabel) {
			e = e.With("label", volume.PoolLabel)
		}
	default:
		return feature.PluginErr(err, capability)
	}
	if field != "" {
		e = e.With("field", field)
	}
	return e
}

// needPool refuses a volume command on a Machine without a pool, before
// the plugin is asked (its spec may lag the label by a refresh).
func (f *Feature) needPool() (string, error) {
	rec := f.host.Machine()
	pool := rec.Labels[volume.PoolLabel]
	if pool == "" {
		return "", rpc.Errorf(rpc.CodeFailedPrecond,
			"Machine %s has no ZFS pool, so no Provisioned Volumes: set one with `ployz machine update %s --zfs-pool NAME` (label %s)",
			rec.Name, rec.Name, volume.PoolLabel).With("label", volume.PoolLabel).With("machine", rec.Name)
	}
	return pool, nil
}

// callVolume runs fn against the volume plugin serving capability.
func (f *Feature) callVolume(ctx context.Context, capability string, fn func(context.Context, volumev1.VolumeClient) error) error {
	if f.plugins() == nil {
		return rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", capability)
	}
	err := f.plugins().Call(ctx, capability, func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, volumev1.NewVolumeClient(conn))
	})
	if err != nil {
		return volumeErr(err, capability)
	}
	return nil
}

// volumeOf is the Machine RPC form of a plugin's VolumeInfo.
func (f *Feature) volumeOf(pool string, vi *volumev1.VolumeInfo) rpc.Volume {
	v := rpc.Volume{MachineID: f.host.MachineID(), Name: vi.GetName(), Pool: pool, Dataset: vi.GetDataset(), Mountpoint: vi.GetMountpoint(),
		SizeBytes: vi.GetSizeBytes(), UsedBytes: vi.GetUsedBytes(), Created: vi.GetCreatedUnixNanos(), ResumeToken: vi.GetResumeToken(),
		ReadOnly: vi.GetReadOnly(), Snapshots: []rpc.VolumeSnapshot{}}
	for _, s := range vi.GetSnapshotDetails() {
		v.Snapshots = append(v.Snapshots, rpc.VolumeSnapshot{Name: s.GetName(), Created: s.GetCreatedUnixNanos(), UsedBytes: s.GetUsedBytes(), GUID: s.GetGuid()})
	}
	for _, b := range vi.GetBookmarks() {
		v.Bookmarks = append(v.Bookmarks, rpc.VolumeBookmark{Name: b.GetName(), Created: b.GetCreatedUnixNanos(), GUID: b.GetGuid()})
	}
	if cs, err := f.volumeCopies(); err == nil {
		c := cs.Get(v.Name).View()
		v.Copy = &c
	}
	return v
}

func (f *Feature) createVolume(ctx context.Context, req rpc.CreateVolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.Volume{}, rpc.InvalidField("name", "%v", err)
	}
	if req.SizeBytes < volume.MinSize {
		return rpc.Volume{}, rpc.InvalidField("size_bytes", "%d is below the minimum of %d (1MiB)", req.SizeBytes, volume.MinSize)
	}
	pool, err := f.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = f.callVolume(ctx, volume.CapCreate, func(ctx context.Context, c volumev1.VolumeClient) error {
		resp, err := c.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: req.Name, SizeBytes: req.SizeBytes})
		if err != nil {
			return err
		}
		// A volume provisioned here starts as its Writer.
		if err := f.volumeCreated(req.Name); err != nil {
			return err
		}
		out = f.volumeOf(pool, resp.GetVolume())
		return nil
	})
	return out, err
}

func (f *Feature) removeVolume(ctx context.Context, req rpc.VolumeRequest) (rpc.VolumeRemoved, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.VolumeRemoved{}, rpc.InvalidField("name", "%v", err)
	}
	if _, err := f.needPool(); err != nil {
		return rpc.VolumeRemoved{}, err
	}
	err := f.callVolume(ctx, volume.CapRemove, func(ctx context.Context, c volumev1.VolumeClient) error {
		_, err := c.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: req.Name})
		return err
	})
	if err != nil {
		return rpc.VolumeRemoved{}, err
	}
	if err := f.volumeRemoved(req.Name); err != nil {
		return rpc.VolumeRemoved{}, err
	}
	return rpc.VolumeRemoved{MachineID: f.host.MachineID(), Removed: req.Name}, nil
}

// listVolumes answers every Machine, one without a pool with none.
func (f *Feature) listVolumes(ctx context.Context, _ rpc.None) (rpc.VolumeList, error) {
	out := rpc.VolumeList{MachineID: f.host.MachineID(), Volumes: []rpc.Volume{}}
	pool := f.host.Machine().Labels[volume.PoolLabel]
	if pool == "" {
		return out, nil
	}
	out.Pool = pool
	err := f.callVolume(ctx, volume.CapList, func(ctx context.Context, c volumev1.VolumeClient) error {
		p, err := c.Pool(ctx, &volumev1.PoolRequest{})
		if err != nil {
			return err
		}
		out.Health, out.FreeBytes = p.GetHealth(), p.GetFreeBytes()
		resp, err := c.ListVolumes(ctx, &volumev1.ListVolumesRequest{})
		if err != nil {
			return err
		}
		for _, vi := range resp.GetVolumes() {
			out.Volumes = append(out.Volumes, f.volumeOf(pool, vi))
		}
		return nil
	})
	return out, err
}

func (f *Feature) inspectVolume(ctx context.Context, req rpc.VolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.Volume{}, rpc.InvalidField("name", "%v", err)
	}
	pool, err := f.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = f.callVolume(ctx, volume.CapInspect, func(ctx context.Context, c volumev1.VolumeClient) error {
		resp, err := c.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: req.Name})
		if err == nil {
			out = f.volumeOf(pool, resp.GetVolume())
		}
		return err
	})
	return out, err
}

func (f *Feature) snapshotVolume(ctx context.Context, req rpc.SnapshotVolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.Volume{}, rpc.InvalidField("volume", "%v", err)
	}
	if err := volume.ValidSnapshot(req.Snapshot); err != nil {
		return rpc.Volume{}, rpc.InvalidField("snapshot", "%v", err)
	}
	pool, err := f.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = f.callVolume(ctx, volume.CapSnapshot, func(ctx context.Context, c volumev1.VolumeClient) error {
		if _, err := c.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: req.Volume, Snapshot: req.Snapshot}); err != nil {
			return err
		}
		resp, err := c.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: req.Volume})
		if err != nil {
			return err
		}
		vi := resp.GetVolume()
		if volume.IsRunSnapshot(req.Snapshot) && f.canPrune() {
			vi = pruneRuns(ctx, f.log, c, vi)
		}
		out = f.volumeOf(pool, vi)
		return nil
	})
	return out, err
}

// sendVolume streams the plugin's Send chunks to the client as data
// frames.
func (f *Feature) sendVolume(ctx context.Context, req rpc.SendVolumeRequest, s rpc.StreamConn) error {
	if req.ResumeToken == "" {
		if err := volume.ValidName(req.Volume); err != nil {
			return rpc.InvalidField("volume", "%v", err)
		}
		if err := volume.ValidSnapshot(req.Snapshot); err != nil {
			return rpc.InvalidField("snapshot", "%v", err)
		}
		if req.FromSnapshot != "" {
			if err := volume.ValidSnapshot(req.FromSnapshot); err != nil {
				return rpc.InvalidField("from_snapshot", "%v", err)
			}
		}
	}
	if _, err := f.needPool(); err != nil {
		return err
	}
	if req.RawData {
		s = rpc.RawData(s)
	}
	return f.pluginSend(ctx, req, nil, func(b []byte) error {
		if err := s.Send(rpc.StreamFrame{Data: b}); err != nil {
			return status.Errorf(codes.Canceled, "client went away: %v", err)
		}
		return nil
	})
}

// sendVolumeTo sends a snapshot stream straight to another Machine's
// receive_volume over its volume transport (core/volumesend).
func (f *Feature) sendVolumeTo(ctx context.Context, req rpc.SendVolumeToRequest, s rpc.StreamConn) error {
	if err := volumesend.Check(req); err != nil {
		return err
	}
	if _, err := f.needPool(); err != nil {
		return err
	}
	return volumesend.Serve(ctx, req, s, volumesend.Env{Self: f.host.MachineID(), Peers: f.host.Peers,
		Dial: func(ctx context.Context, p rpc.Peer) (*rpc.Client, error) {
			return f.host.DialPeer(ctx, p.AtPort(f.host.VolumePort()))
		},
		Send: f.pluginSend})
}

// pluginSend runs the plugin's Send for req, handing data each chunk;
// with estimate, it asks the plugin for the stream's size first (a
// plugin from before the estimate gives none).
func (f *Feature) pluginSend(ctx context.Context, req rpc.SendVolumeRequest, estimate func(uint64), data func([]byte) error) error {
	return f.callVolume(ctx, volume.CapSend, func(ctx context.Context, c volumev1.VolumeClient) error {
		st, err := c.Send(ctx, &volumev1.SendRequest{Volume: req.Volume, Snapshot: req.Snapshot, FromSnapshot: req.FromSnapshot,
			ResumeToken: req.ResumeToken, Estimate: estimate != nil})
		if err != nil {
			return err
		}
		for {
			chunk, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if n := chunk.GetEstimatedBytes(); n > 0 && estimate != nil {
				estimate(n)
			}
			if len(chunk.GetData()) == 0 {
				continue
			}
			if err := data(chunk.GetData()); err != nil {
				return err
			}
		}
	})
}

// receiveVolume feeds the client's data frames into the plugin's Receive
// and answers one VolumeReceived event.
func (f *Feature) receiveVolume(ctx context.Context, req rpc.ReceiveVolumeRequest, s rpc.StreamConn) error {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.InvalidField("volume", "%v", err)
	}
	pool, err := f.needPool()
	if err != nil {
		return err
	}
	cs, err := f.volumeCopies()
	if err != nil {
		return err
	}
	if err := refuseReceiveIntoWriter(req.Volume, cs.Get(req.Volume)); err != nil {
		return err
	}
	var got rpc.VolumeReceived
	err = f.callVolume(ctx, volume.CapReceive, func(ctx context.Context, c volumev1.VolumeClient) error {
		// An upload cut short cancels the plugin's stream, so zfs sees the
		// stream end early (and keeps a resume token when resumable).
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := c.Receive(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&volumev1.ReceiveChunk{Header: &volumev1.ReceiveHeader{Volume: req.Volume, Resumable: req.Resumable}}); err != nil {
			return err
		}
		// An error from Send is the plugin ending the stream: its answer
		// below says why.
		err = rpc.ReadUpload(s, func(b []byte) error { return st.Send(&volumev1.ReceiveChunk{Data: b}) })
		if errors.Is(err, rpc.ErrUploadCut) {
			cancel()
			return status.Errorf(codes.Canceled, "volume: %v", err)
		}
		resp, err := st.CloseAndRecv()
		if err != nil {
			return err
		}
		// The stream landed: this copy keeps its newest run snapshots
		// (the one just received among them, the next stream's base).
		vi := resp.GetVolume()
		if f.canPrune() {
			vi = pruneRuns(ctx, f.log, c, vi)
		}
		got = rpc.VolumeReceived{Bytes: resp.GetBytes(), Volume: f.volumeOf(pool, vi)}
		return nil
	})
	if err != nil {
		return err
	}
	return rpc.ReceiveVolume.Send(s, got)
}
