// Package volumesend is the volume transport between Machines: the
// source Machine's side of send_volume_to (rpc.CmdSendVolumeTo). Its
// ployzd runs the snapshot stream from its volume plugin and writes it
// straight into the target Machine's receive_volume over the mesh, on
// the target's volume transport port (authenticated as Machine RPC is),
// while the client that asked gets progress events and the target's
// answer. The stream never crosses the operator's CLI.
package volumesend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/volume"
)

// Env is what the Machine serving send_volume_to lends it.
type Env struct {
	// Self is this Machine's ID: a target naming it is refused.
	Self string
	// Peers lists the Machines this one can reach.
	Peers func(ctx context.Context) ([]rpc.Peer, error)
	// Dial opens the target's volume transport over the mesh.
	Dial func(ctx context.Context, p rpc.Peer) (*rpc.Client, error)
	// Send runs this Machine's snapshot stream for req: estimate once
	// with the stream's size when the plugin gives one, then data with
	// each chunk in order. An error from data ends it.
	Send func(ctx context.Context, req rpc.SendVolumeRequest, estimate func(uint64), data func([]byte) error) error
	// Tick is how often progress is reported; zero means every second.
	Tick time.Duration
}

// Check refuses a send_volume_to request missing what it needs, naming
// the field.
func Check(req rpc.SendVolumeToRequest) error {
	if req.Target == "" {
		return rpc.InvalidField("target", "required: the Machine the stream lands on")
	}
	// The volume names where it lands on the target, with a token too.
	if err := volume.ValidName(req.Volume); err != nil {
		return rpc.InvalidField("volume", "%v", err)
	}
	if req.ResumeToken != "" {
		return nil
	}
	if err := volume.ValidSnapshot(req.Snapshot); err != nil {
		return rpc.InvalidField("snapshot", "%v", err)
	}
	if req.FromSnapshot != "" {
		if err := volume.ValidSnapshot(req.FromSnapshot); err != nil {
			return rpc.InvalidField("from_snapshot", "%v", err)
		}
	}
	return nil
}

// Serve runs one send_volume_to for req (checked by Check) on s: it opens the
// target's receive_volume, pumps this Machine's stream into it, reports
// the bytes sent every Tick and ends with the target's answer. A stream
// cut on the way leaves the target's resume token (with Resumable), so a
// retry sends only the rest.
func Serve(ctx context.Context, req rpc.SendVolumeToRequest, s rpc.StreamConn, env Env) error {
	t, err := target(ctx, env, req.Target)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := env.Dial(ctx, t)
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "target: machine %s at %s: %v", t.Name, t.Address, err).With("machine_id", t.ID)
	}
	defer c.Close()
	up, err := rpc.Open(ctx, c, rpc.Target{}, rpc.ReceiveVolume, rpc.ReceiveVolumeRequest{Volume: req.Volume, Resumable: req.Resumable})
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "target: machine %s: receive_volume: %v", t.Name, err).With("machine_id", t.ID)
	}
	defer up.Close()
	// Every Machine serving the transport reads raw data.
	up.SendRawData()

	p := &progress{target: t.ID}
	stop := p.report(s, env.Tick)
	sent := p.pump(ctx, env, req.Send(), up)
	if sent.plugin != nil && sent.upload == nil {
		// This Machine's stream failed: cut the upload (the target keeps
		// its resume token) and say why, as send_volume would.
		stop()
		up.Close()
		return sent.plugin
	}
	got, err := finish(up)
	stop()
	if err == nil && sent.upload != nil {
		err = sent.upload
	}
	if err != nil {
		return transferErr(t, p.n.Load(), err)
	}
	ev := p.event()
	ev.Received = &got
	return s.Send(rpc.StreamFrame{Event: mustEvent(ev)})
}

// target resolves the Machine the stream lands on.
func target(ctx context.Context, env Env, name string) (rpc.Peer, error) {
	peers, err := env.Peers(ctx)
	if err != nil {
		return rpc.Peer{}, rpc.Errorf(rpc.CodeUnavailable, "list Machines: %v", err)
	}
	p, err := rpc.Resolve(peers, name)
	if err != nil {
		var e *rpc.Error
		if errors.As(err, &e) {
			return p, e.With("field", "target")
		}
		return p, rpc.InvalidField("target", "%v", err)
	}
	if p.ID == env.Self {
		return p, rpc.InvalidField("target", "%s is this Machine: a volume is sent to another one", name)
	}
	return p, nil
}

// progress counts what went to the target and reports it.
type progress struct {
	target   string
	n        atomic.Uint64
	estimate atomic.Uint64
}

func (p *progress) event() rpc.VolumeTransfer {
	return rpc.VolumeTransfer{TargetID: p.target, Bytes: p.n.Load(), EstimatedBytes: p.estimate.Load()}
}

// report sends a progress event every tick until the returned stop,
// which returns once it no longer writes to s.
func (p *progress) report(s rpc.StreamConn, tick time.Duration) (stop func()) {
	return iocount.Every(tick, func() {
		s.Send(rpc.StreamFrame{Event: mustEvent(p.event())}) // a client gone ends the stream anyway
	})
}

// sendResult is how the source's stream ended: plugin is its own
// failure, upload the target's stream breaking under it.
type sendResult struct {
	plugin, upload error
}

// pump writes the source's stream into up.
func (p *progress) pump(ctx context.Context, env Env, req rpc.SendVolumeRequest, up *rpc.ClientStream) sendResult {
	var r sendResult
	r.plugin = env.Send(ctx, req, func(n uint64) { p.estimate.Store(n) }, func(b []byte) error {
		if err := up.Send(rpc.StreamFrame{Data: b}); err != nil {
			r.upload = err
			return err
		}
		p.n.Add(uint64(len(b)))
		return nil
	})
	return r
}

// finish ends the upload and reads the target's answer; a target that
// ended the stream itself answers why.
func finish(up *rpc.ClientStream) (rpc.VolumeReceived, error) {
	return rpc.ReceiveVolume.Answer(up)
}

// transferErr names the target and how far the stream got; a Machine's
// own refusal keeps its code and details.
func transferErr(t rpc.Peer, n uint64, err error) error {
	var e *rpc.Error
	if errors.As(err, &e) {
		c := e.With("machine_id", t.ID)
		c.Message = fmt.Sprintf("send to %s after %d bytes: %s", t.Name, n, e.Message)
		return c
	}
	return rpc.Errorf(rpc.CodeUnavailable, "send to %s after %d bytes: %v", t.Name, n, err).With("machine_id", t.ID).With("bytes", n)
}

func mustEvent(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed shapes are marshalled
	}
	return b
}
