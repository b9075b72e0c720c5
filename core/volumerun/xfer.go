package volumerun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	units "github.com/docker/go-units"

	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
)

// A volume copy between two Machines goes Machine to Machine when both
// serve send_volume_to (the source sends, the target's volume transport
// receives; only progress crosses this process), else through this
// process (send_volume into receive_volume): a Cluster of mixed versions.

// volumeCopy is one snapshot stream from one Machine's volume into the
// same-named volume on another.
type volumeCopy struct {
	from, to string
	req      rpc.SendVolumeRequest
	// resumable keeps a cut receive's resume token on the target.
	resumable bool
	// what names the stream in progress lines ("full run-3").
	what string
	// progress gets a line every second.
	progress func(text string)
}

// Copied is how a copy between two Machines ended.
type Copied struct {
	Bytes uint64
	// Got is the target's answer: its volume after the receive.
	Got rpc.VolumeReceived
	// Direct: Machine to Machine, not through this process.
	Direct bool
}

// Copy copies machine's stream for req into to's volume of the same name
// (resumable: a cut one leaves a resume token on to), reporting progress
// as events of step "send".
func (rn *Runner) Copy(ctx context.Context, machine, to string, req rpc.SendVolumeRequest) (Copied, error) {
	what := "full " + req.Snapshot
	switch {
	case req.ResumeToken != "":
		what = "the rest of a cut transfer"
	case req.FromSnapshot != "":
		what = "incremental " + req.FromSnapshot + " → " + req.Snapshot
	}
	progress := func(text string) { rn.emit(Event{Kind: EventProgress, Step: "send", Machine: to, Text: text}) }
	return volumeCopy{from: machine, to: to, req: req, resumable: true, what: what, progress: progress}.run(ctx, rn.Entry)
}

// run copies the stream, reporting progress every second.
func (vc volumeCopy) run(ctx context.Context, ent *rpc.Client) (Copied, error) {
	if direct(ctx, ent, vc.from, vc.to) {
		return vc.direct(ctx, ent)
	}
	return vc.relay(ctx, ent)
}

// direct says whether both Machines serve the volume transport.
func direct(ctx context.Context, ent *rpc.Client, machines ...string) bool {
	for _, m := range machines {
		if !serves(ctx, ent, m, rpc.CapSendVolumeTo) {
			return false
		}
	}
	return true
}

// serves reports whether machine advertises capability (an older
// daemon, or one that did not answer, does not).
func serves(ctx context.Context, ent *rpc.Client, machine, capability string) bool {
	var ct rpc.Contract
	return rpc.InvokeInto(ctx, ent, rpc.Target{One: machine}, rpc.DescribeContract, rpc.None{}, &ct) == nil && slices.Contains(ct.Capabilities, capability)
}

// direct runs send_volume_to on the source and reports its progress
// events.
func (vc volumeCopy) direct(ctx context.Context, ent *rpc.Client) (Copied, error) {
	out := Copied{Direct: true}
	req := rpc.SendVolumeToRequest{Volume: vc.req.Volume, Snapshot: vc.req.Snapshot, FromSnapshot: vc.req.FromSnapshot,
		ResumeToken: vc.req.ResumeToken, Target: vc.to, Resumable: vc.resumable}
	st, err := rpc.Open(ctx, ent, rpc.Target{One: vc.from}, rpc.SendVolumeTo, req)
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
			vc.report(last.Bytes, last.EstimatedBytes, time.Since(start), true)
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("send %s from %s to %s after %d bytes: %w", vc.req.Volume, vc.from, vc.to, out.Bytes, err)
		}
		if len(f.Event) == 0 {
			continue
		}
		if last, err = rpc.SendVolumeTo.Event(f); err != nil {
			return out, err
		}
		out.Bytes = last.Bytes
		if last.Received != nil {
			out.Got = *last.Received
			continue
		}
		vc.report(last.Bytes, last.EstimatedBytes, time.Since(start), false)
	}
}

// relay streams the source's send_volume into the target's
// receive_volume through this process.
func (vc volumeCopy) relay(ctx context.Context, ent *rpc.Client) (Copied, error) {
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		_, err := SendStream(ctx, ent, vc.from, vc.req, pw)
		pw.CloseWithError(err)
		sent <- err
	}()
	cr := iocount.NewReader(pr)
	start := time.Now()
	stop := iocount.Every(time.Second, func() { vc.report(uint64(cr.N()), 0, time.Since(start), false) })
	got, err := ReceiveStream(ctx, ent, vc.to, rpc.ReceiveVolumeRequest{Volume: vc.req.Volume, Resumable: vc.resumable}, cr)
	stop()
	pr.CloseWithError(errors.New("the receiver ended"))
	serr := <-sent
	if err == nil && serr != nil {
		err = serr
	}
	n := uint64(cr.N())
	vc.report(n, 0, time.Since(start), true)
	return Copied{Bytes: n, Got: got}, err
}

// report makes one progress line: bytes, rate and, with the stream's
// estimated size, the ETA; final lines have no ETA.
func (vc volumeCopy) report(n, estimate uint64, d time.Duration, final bool) {
	if vc.progress == nil {
		return
	}
	line := units.BytesSize(float64(n))
	if estimate > 0 && !final {
		line += " of ~" + units.BytesSize(float64(estimate))
	}
	if d > 0 {
		line += fmt.Sprintf(" in %s (%s/s)", d.Round(100*time.Millisecond), units.BytesSize(float64(n)/d.Seconds()))
	}
	if estimate > n && n > 0 && !final {
		eta := time.Duration(float64(d) * float64(estimate-n) / float64(n))
		line += ", ETA " + eta.Round(time.Second).String()
	}
	vc.progress(fmt.Sprintf("%s → %s %s: %s", vc.from, vc.to, vc.what, line))
}

// SendStream writes machine's send_volume stream for req to out and
// answers the bytes written.
func SendStream(ctx context.Context, ent *rpc.Client, machine string, req rpc.SendVolumeRequest, out io.Writer) (int64, error) {
	req.RawData = true // Recv reads data from either place
	st, err := rpc.Open(ctx, ent, rpc.Target{One: machine}, rpc.SendVolume, req)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	var n int64
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("send %s from %s after %d bytes: %w", req.Volume, machine, n, err)
		}
		if len(f.Data) > 0 {
			if _, err := out.Write(f.Data); err != nil {
				return n, fmt.Errorf("write %s's stream: %w", req.Volume, err)
			}
			n += int64(len(f.Data))
		}
		if f.Done {
			return n, nil
		}
	}
}

// ReceiveStream feeds in to machine's receive_volume for req until EOF
// and answers the Machine's final event.
func ReceiveStream(ctx context.Context, ent *rpc.Client, machine string, req rpc.ReceiveVolumeRequest, in io.Reader) (rpc.VolumeReceived, error) {
	var got rpc.VolumeReceived
	st, err := rpc.Open(ctx, ent, rpc.Target{One: machine}, rpc.ReceiveVolume, req)
	if err != nil {
		return got, err
	}
	defer st.Close()
	st.SendRawData()
	buf := make([]byte, 256<<10)
	for {
		k, rerr := in.Read(buf)
		if k > 0 {
			if err := st.Send(rpc.StreamFrame{Data: buf[:k]}); err != nil {
				break // the Machine ended the stream; its answer says why
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return got, fmt.Errorf("read %s's stream: %w", req.Volume, rerr)
		}
	}
	return rpc.ReceiveVolume.Answer(st)
}
