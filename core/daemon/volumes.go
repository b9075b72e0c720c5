package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumesend"
	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// VolumePlugin is the volume plugin's name.
const VolumePlugin = "volume-zfs"

// pluginStartWait bounds how long checking a pool label waits for the
// volume plugin to serve.
const pluginStartWait = 90 * time.Second

// volumePlugin hands volume-zfs its spec: the pool the Machine's
// ployz.zfs.pool label names (none without it), so an operator sets it
// with `ployz machine init|add|update --zfs-pool` as the Observe budget.
// It is not withdrawn on reset: the volumes stay on the Machine's disks.
func (d *Daemon) volumePlugin() servingPlugin {
	return servingPlugin{name: VolumePlugin, what: "volume-zfs", spec: d.volumeSpec,
		check: func(b []byte) error { _, err := volume.ParseSpec(b); return err }}
}

func (d *Daemon) volumeLoop(ctx context.Context) { d.keepConfigured(ctx, d.volumePlugin()) }

func (d *Daemon) volumeSpec() ([]byte, error) {
	rec := d.record()
	return json.Marshal(volume.SpecFromLabels(rec.ID, rec.Labels))
}

// applyPool hands volume-zfs a pool label's change at once instead of at
// its next refresh; a failure is left to that refresh.
func (d *Daemon) applyPool(ctx context.Context) {
	if d.record().Phase != machine.Participating {
		return
	}
	if err := d.configure(ctx, d.volumePlugin()); err != nil {
		d.log.Warn("zfs pool not applied yet; the next refresh retries", "plugin", VolumePlugin, "error", err)
	}
}

// checkPoolLabel refuses a ployz.zfs.pool label value that is not a pool
// name, or names a pool this Machine does not have (asked of the volume
// plugin), before anything changes. field is how the request names it.
func (d *Daemon) checkPoolLabel(ctx context.Context, field string, labels map[string]string) error {
	pool, ok := labels[volume.PoolLabel]
	if !ok {
		return nil
	}
	if err := volume.ValidPool(pool); err != nil {
		return rpc.InvalidField(field, "%v", err)
	}
	// A Machine being enrolled has just started ployzd, and the plugin
	// host starts its plugins beside the first RPCs: give it a moment.
	for wait := time.Now().Add(pluginStartWait); d.plugins != nil && !d.plugins.Available(volume.CapCreate) && time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if d.plugins == nil || !d.plugins.Available(volume.CapCreate) {
		return rpc.Errorf(rpc.CodeUnavailable, "%s: cannot check pool %q: the volume plugin is not serving %s on this Machine (see `ployz machine inspect`)",
			field, pool, volume.CapCreate).With("capability", volume.CapCreate).With("field", field)
	}
	err := d.plugins.Call(ctx, volume.CapCreate, func(ctx context.Context, conn *grpc.ClientConn) error {
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

// volumeRoutes forward the volume commands to the volume plugin, each
// advertised while a healthy plugin serves its capability.
func (d *Daemon) volumeRoutes() {
	avail := func(capability string) func() bool {
		return func() bool { return d.plugins != nil && d.plugins.Available(capability) }
	}
	for _, r := range []rpc.Route{
		rpc.Bind(rpc.CreateVolume, d.createVolume),
		rpc.Bind(rpc.RemoveVolume, d.removeVolume),
		rpc.Bind(rpc.ListVolumes, d.listVolumes),
		rpc.Bind(rpc.InspectVolume, d.inspectVolume),
		rpc.Bind(rpc.SnapshotVolume, d.snapshotVolume),
	} {
		r.Available = avail(r.Capability)
		d.rpc.Handle(r)
	}
	// set_volume_copy is ployzd's own (volumecopies.go), served while the
	// plugin answers whether the volume is here.
	copySet := rpc.Bind(rpc.SetVolumeCopy, d.setVolumeCopy)
	copySet.Available = avail(volume.CapInspect)
	d.rpc.Handle(copySet)
	// volume_task is ployzd's own too (volumetasks.go): Docker runs it,
	// the copy records admit it.
	task := rpc.Bind(rpc.VolumeTask, d.volumeTask)
	task.Available = func() bool { return d.ctrs != nil && d.ctrs.docker != nil }
	d.rpc.Handle(task)
	for _, r := range []struct {
		route  rpc.StreamRoute
		plugin string // the plugin capability it needs
	}{
		{rpc.BindStream(rpc.SendVolume, d.sendVolume), volume.CapSend},
		{rpc.BindStream(rpc.ReceiveVolume, d.receiveVolume), volume.CapReceive},
		// ployzd's own, over the plugin's send; a Machine advertising it
		// also serves the volume transport (VolumePort) as a target.
		{rpc.BindStream(rpc.SendVolumeTo, d.sendVolumeTo), volume.CapSend},
	} {
		d.rpc.HandleStream(r.route)
		// HandleStream catalogues the stream as always served; advertise
		// it only while the plugin is healthy (as tail_logs).
		cmd := r.route.Command
		d.rpc.Handle(rpc.Route{Command: cmd, Capability: r.route.Capability, Available: avail(r.plugin),
			Handler: func(context.Context, json.RawMessage) (any, error) {
				return nil, rpc.Errorf(rpc.CodeInvalidArgument, "%s is a streaming command: use Stream", cmd)
			}})
	}
}

// volumeErr turns a volume plugin's failure into a Machine RPC error: its
// argument errors name their field ("name: ..."), a clash is a conflict,
// a missing volume not_found, no pool a failed precondition naming the
// label; a refusal keeps its capability.
func volumeErr(err error, capability string) error {
	if _, ok := pluginhost.CapabilityFromError(err); ok {
		return pluginErr(err, capability)
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
		return pluginErr(err, capability)
	}
	if field != "" {
		e = e.With("field", field)
	}
	return e
}

// needPool refuses a volume command on a Machine without a pool, before
// the plugin is asked (its spec may lag the label by a refresh).
func (d *Daemon) needPool() (string, error) {
	rec := d.record()
	pool := rec.Labels[volume.PoolLabel]
	if pool == "" {
		return "", rpc.Errorf(rpc.CodeFailedPrecond,
			"Machine %s has no ZFS pool, so no Provisioned Volumes: set one with `ployz machine update %s --zfs-pool NAME` (label %s)",
			rec.Name, rec.Name, volume.PoolLabel).With("label", volume.PoolLabel).With("machine", rec.Name)
	}
	return pool, nil
}

// callVolume runs fn against the volume plugin serving capability.
func (d *Daemon) callVolume(ctx context.Context, capability string, fn func(context.Context, volumev1.VolumeClient) error) error {
	if d.plugins == nil {
		return rpc.Errorf(rpc.CodeUnavailable, "no plugin host").With("capability", capability)
	}
	err := d.plugins.Call(ctx, capability, func(ctx context.Context, conn *grpc.ClientConn) error {
		return fn(ctx, volumev1.NewVolumeClient(conn))
	})
	if err != nil {
		return volumeErr(err, capability)
	}
	return nil
}

// volumeOf is the Machine RPC form of a plugin's VolumeInfo.
func (d *Daemon) volumeOf(pool string, vi *volumev1.VolumeInfo) rpc.Volume {
	v := rpc.Volume{MachineID: d.record().ID, Name: vi.GetName(), Pool: pool, Dataset: vi.GetDataset(), Mountpoint: vi.GetMountpoint(),
		SizeBytes: vi.GetSizeBytes(), UsedBytes: vi.GetUsedBytes(), Created: vi.GetCreatedUnixNanos(), ResumeToken: vi.GetResumeToken(),
		ReadOnly: vi.GetReadOnly(), Snapshots: []rpc.VolumeSnapshot{}}
	for _, s := range vi.GetSnapshotDetails() {
		v.Snapshots = append(v.Snapshots, rpc.VolumeSnapshot{Name: s.GetName(), Created: s.GetCreatedUnixNanos(), UsedBytes: s.GetUsedBytes(), GUID: s.GetGuid()})
	}
	for _, b := range vi.GetBookmarks() {
		v.Bookmarks = append(v.Bookmarks, rpc.VolumeBookmark{Name: b.GetName(), Created: b.GetCreatedUnixNanos(), GUID: b.GetGuid()})
	}
	if cs, err := d.volumeCopies(); err == nil {
		c := cs.Get(v.Name).View()
		v.Copy = &c
	}
	return v
}

func (d *Daemon) createVolume(ctx context.Context, req rpc.CreateVolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.Volume{}, rpc.InvalidField("name", "%v", err)
	}
	if req.SizeBytes < volume.MinSize {
		return rpc.Volume{}, rpc.InvalidField("size_bytes", "%d is below the minimum of %d (1MiB)", req.SizeBytes, volume.MinSize)
	}
	pool, err := d.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = d.callVolume(ctx, volume.CapCreate, func(ctx context.Context, c volumev1.VolumeClient) error {
		resp, err := c.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: req.Name, SizeBytes: req.SizeBytes})
		if err != nil {
			return err
		}
		// A volume provisioned here starts as its Writer.
		if err := d.volumeCreated(req.Name); err != nil {
			return err
		}
		out = d.volumeOf(pool, resp.GetVolume())
		return nil
	})
	return out, err
}

func (d *Daemon) removeVolume(ctx context.Context, req rpc.VolumeRequest) (rpc.VolumeRemoved, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.VolumeRemoved{}, rpc.InvalidField("name", "%v", err)
	}
	if _, err := d.needPool(); err != nil {
		return rpc.VolumeRemoved{}, err
	}
	err := d.callVolume(ctx, volume.CapRemove, func(ctx context.Context, c volumev1.VolumeClient) error {
		_, err := c.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: req.Name})
		return err
	})
	if err != nil {
		return rpc.VolumeRemoved{}, err
	}
	if err := d.volumeRemoved(req.Name); err != nil {
		return rpc.VolumeRemoved{}, err
	}
	return rpc.VolumeRemoved{MachineID: d.record().ID, Removed: req.Name}, nil
}

// listVolumes answers every Machine, one without a pool with none.
func (d *Daemon) listVolumes(ctx context.Context, _ rpc.None) (rpc.VolumeList, error) {
	out := rpc.VolumeList{MachineID: d.record().ID, Volumes: []rpc.Volume{}}
	pool := d.record().Labels[volume.PoolLabel]
	if pool == "" {
		return out, nil
	}
	out.Pool = pool
	err := d.callVolume(ctx, volume.CapList, func(ctx context.Context, c volumev1.VolumeClient) error {
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
			out.Volumes = append(out.Volumes, d.volumeOf(pool, vi))
		}
		return nil
	})
	return out, err
}

func (d *Daemon) inspectVolume(ctx context.Context, req rpc.VolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Name); err != nil {
		return rpc.Volume{}, rpc.InvalidField("name", "%v", err)
	}
	pool, err := d.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = d.callVolume(ctx, volume.CapInspect, func(ctx context.Context, c volumev1.VolumeClient) error {
		resp, err := c.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: req.Name})
		if err == nil {
			out = d.volumeOf(pool, resp.GetVolume())
		}
		return err
	})
	return out, err
}

func (d *Daemon) snapshotVolume(ctx context.Context, req rpc.SnapshotVolumeRequest) (rpc.Volume, error) {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.Volume{}, rpc.InvalidField("volume", "%v", err)
	}
	if err := volume.ValidSnapshot(req.Snapshot); err != nil {
		return rpc.Volume{}, rpc.InvalidField("snapshot", "%v", err)
	}
	pool, err := d.needPool()
	if err != nil {
		return rpc.Volume{}, err
	}
	var out rpc.Volume
	err = d.callVolume(ctx, volume.CapSnapshot, func(ctx context.Context, c volumev1.VolumeClient) error {
		if _, err := c.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: req.Volume, Snapshot: req.Snapshot}); err != nil {
			return err
		}
		resp, err := c.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: req.Volume})
		if err != nil {
			return err
		}
		vi := resp.GetVolume()
		if volume.IsRunSnapshot(req.Snapshot) && d.canPrune() {
			vi = pruneRuns(ctx, d.log, c, vi)
		}
		out = d.volumeOf(pool, vi)
		return nil
	})
	return out, err
}

// sendVolume streams the plugin's Send chunks to the client as data
// frames.
func (d *Daemon) sendVolume(ctx context.Context, req rpc.SendVolumeRequest, s rpc.StreamConn) error {
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
	if _, err := d.needPool(); err != nil {
		return err
	}
	if req.RawData {
		s = rpc.RawData(s)
	}
	return d.pluginSend(ctx, req, nil, func(b []byte) error {
		if err := s.Send(rpc.StreamFrame{Data: b}); err != nil {
			return status.Errorf(codes.Canceled, "client went away: %v", err)
		}
		return nil
	})
}

// sendVolumeTo sends a snapshot stream straight to another Machine's
// receive_volume over its volume transport (core/volumesend).
func (d *Daemon) sendVolumeTo(ctx context.Context, req rpc.SendVolumeToRequest, s rpc.StreamConn) error {
	if err := volumesend.Check(req); err != nil {
		return err
	}
	if _, err := d.needPool(); err != nil {
		return err
	}
	return volumesend.Serve(ctx, req, s, volumesend.Env{Self: d.record().ID, Peers: d.peers,
		Dial: func(ctx context.Context, p rpc.Peer) (*rpc.Client, error) {
			return d.dialPeer(ctx, p.AtPort(d.cfg.VolumePort))
		},
		Send: d.pluginSend})
}

// pluginSend runs the plugin's Send for req, handing data each chunk;
// with estimate, it asks the plugin for the stream's size first (a
// plugin from before the estimate gives none).
func (d *Daemon) pluginSend(ctx context.Context, req rpc.SendVolumeRequest, estimate func(uint64), data func([]byte) error) error {
	return d.callVolume(ctx, volume.CapSend, func(ctx context.Context, c volumev1.VolumeClient) error {
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
func (d *Daemon) receiveVolume(ctx context.Context, req rpc.ReceiveVolumeRequest, s rpc.StreamConn) error {
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.InvalidField("volume", "%v", err)
	}
	pool, err := d.needPool()
	if err != nil {
		return err
	}
	cs, err := d.volumeCopies()
	if err != nil {
		return err
	}
	if err := refuseReceiveIntoWriter(req.Volume, cs.Get(req.Volume)); err != nil {
		return err
	}
	var got rpc.VolumeReceived
	err = d.callVolume(ctx, volume.CapReceive, func(ctx context.Context, c volumev1.VolumeClient) error {
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
		if d.canPrune() {
			vi = pruneRuns(ctx, d.log, c, vi)
		}
		got = rpc.VolumeReceived{Bytes: resp.GetBytes(), Volume: d.volumeOf(pool, vi)}
		return nil
	})
	if err != nil {
		return err
	}
	return rpc.ReceiveVolume.Send(s, got)
}
