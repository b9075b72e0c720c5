package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	units "github.com/docker/go-units"

	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
)

// A volume copy between two Machines goes Machine to Machine when both
// serve send_volume_to (the source sends, the target's volume transport
// receives; only progress crosses this CLI), else through this CLI
// (send_volume into receive_volume): a Cluster of mixed versions.

// volumeCopy is one snapshot stream from one Machine's volume into the
// same-named volume on another.
type volumeCopy struct {
	from, to string
	req      rpc.SendVolumeRequest
	// resumable keeps a cut receive's resume token on the target.
	resumable bool
	// what names the stream in progress lines ("full run-3").
	what string
	errw io.Writer
}

// copied is how a volumeCopy ended.
type copied struct {
	bytes  uint64
	got    rpc.VolumeReceived
	direct bool // Machine to Machine, not through this CLI
}

// run copies the stream, printing progress every second on errw.
func (vc volumeCopy) run(ctx context.Context, s session) (copied, error) {
	if direct(ctx, s, vc.from, vc.to) {
		return vc.direct(ctx, s)
	}
	return vc.relay(ctx, s)
}

// direct says whether both Machines serve the volume transport.
func direct(ctx context.Context, s session, machines ...string) bool {
	for _, m := range machines {
		if !serves(ctx, s, m, rpc.CapSendVolumeTo) {
			return false
		}
	}
	return true
}

// direct runs send_volume_to on the source and prints its progress
// events.
func (vc volumeCopy) direct(ctx context.Context, s session) (copied, error) {
	out := copied{direct: true}
	req := rpc.SendVolumeToRequest{Volume: vc.req.Volume, Snapshot: vc.req.Snapshot, FromSnapshot: vc.req.FromSnapshot,
		ResumeToken: vc.req.ResumeToken, Target: vc.to, Resumable: vc.resumable}
	st, err := s.ent.OpenStream(ctx, rpc.Target{One: vc.from}, rpc.CmdSendVolumeTo, req)
	if err != nil {
		return out, err
	}
	defer st.Close()
	start := time.Now()
	var last rpc.VolumeTransfer
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) || (err == nil && f.Done) {
			if last.Received == nil {
				return out, fmt.Errorf("send %s from %s to %s: the stream ended without %s's answer", vc.req.Volume, vc.from, vc.to, vc.to)
			}
			vc.progress(last.Bytes, last.EstimatedBytes, time.Since(start), true)
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("send %s from %s to %s after %d bytes: %w", vc.req.Volume, vc.from, vc.to, out.bytes, err)
		}
		if len(f.Event) == 0 {
			continue
		}
		last = rpc.VolumeTransfer{}
		if err := json.Unmarshal(f.Event, &last); err != nil {
			return out, fmt.Errorf("malformed send_volume_to event: %w", err)
		}
		out.bytes = last.Bytes
		if last.Received != nil {
			out.got = *last.Received
			continue
		}
		vc.progress(last.Bytes, last.EstimatedBytes, time.Since(start), false)
	}
}

// relay streams the source's send_volume into the target's
// receive_volume through this CLI.
func (vc volumeCopy) relay(ctx context.Context, s session) (copied, error) {
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		_, err := sendVolumeTo(ctx, s, vc.from, vc.req, pw)
		pw.CloseWithError(err)
		sent <- err
	}()
	cr := iocount.NewReader(pr)
	start := time.Now()
	stop := iocount.Every(time.Second, func() { vc.progress(uint64(cr.N()), 0, time.Since(start), false) })
	got, err := receiveVolumeFrom(ctx, s, vc.to, rpc.ReceiveVolumeRequest{Volume: vc.req.Volume, Resumable: vc.resumable}, cr)
	stop()
	pr.CloseWithError(errors.New("the receiver ended"))
	serr := <-sent
	if err == nil && serr != nil {
		err = serr
	}
	n := uint64(cr.N())
	vc.progress(n, 0, time.Since(start), true)
	return copied{bytes: n, got: got}, err
}

// progress prints one line: bytes, rate and, with the stream's
// estimated size, the ETA; final lines have no ETA.
func (vc volumeCopy) progress(n, estimate uint64, d time.Duration, final bool) {
	line := units.BytesSize(float64(n))
	if estimate > 0 && !final {
		line += " of ~" + units.BytesSize(float64(estimate))
	}
	line += per(int64(n), d)
	if estimate > n && n > 0 && !final {
		eta := time.Duration(float64(d) * float64(estimate-n) / float64(n))
		line += ", ETA " + eta.Round(time.Second).String()
	}
	fmt.Fprintf(vc.errw, "    %s → %s %s: %s\n", vc.from, vc.to, vc.what, line)
}

// rate is n bytes in d: "32MiB in 1.2s (26.7MiB/s)".
func rate(n int64, d time.Duration) string { return units.BytesSize(float64(n)) + per(n, d) }

func per(n int64, d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf(" in %s (%s/s)", d.Round(100*time.Millisecond), units.BytesSize(float64(n)/d.Seconds()))
}
