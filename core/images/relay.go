package images

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ployz/ployz/core/iocount"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/tarsafe"
)

// maxRelayTargets bounds one image_relay request.
const maxRelayTargets = 256

// RelayEnv is what the Machine serving image_relay lends it.
type RelayEnv struct {
	// Self is this Machine's ID: a target naming it loads locally.
	Self string
	// Peers lists the Machines this one can reach.
	Peers func(ctx context.Context) ([]rpc.Peer, error)
	// Dial opens Machine RPC to a peer over the mesh.
	Dial func(ctx context.Context, p rpc.Peer) (*rpc.Client, error)
	// Load loads an image archive into this Machine's Docker.
	Load func(ctx context.Context, r io.Reader) (rpc.ImageLoadResult, error)
	// Tick is how often progress is reported; zero means every second.
	Tick time.Duration
}

// ServeRelay serves one image_relay stream (see rpc.CmdImageRelay): it
// reads the archive the client sends once and writes each target's copy,
// without the entries that target skips, to that target's image_load
// over the mesh (or to this Machine's Docker), all targets at once.
func ServeRelay(ctx context.Context, req rpc.ImageRelayRequest, s rpc.StreamConn, env RelayEnv) error {
	if err := validateRelay(req); err != nil {
		return err
	}
	peers, err := env.Peers(ctx)
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "list Machines: %v", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sinks := make([]*sink, len(req.Targets))
	var wg sync.WaitGroup
	for i, t := range req.Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sinks[i] = openSink(ctx, env, peers, t)
		}()
	}
	wg.Wait()
	defer func() {
		for _, k := range sinks {
			k.release()
		}
	}()
	if err := s.Send(rpc.StreamFrame{Event: mustEvent(rpc.ImageRelayEvent{Ready: true})}); err != nil {
		return err
	}

	// Progress goes out from one goroutine while data flows; the stream
	// is only written by it until it stops.
	stop := iocount.Every(env.Tick, func() {
		p := map[string]int64{}
		for _, k := range sinks {
			p[k.id] = k.n.Load()
		}
		s.Send(rpc.StreamFrame{Event: mustEvent(rpc.ImageRelayEvent{Progress: p})}) // a client gone ends the stream anyway
	})
	in := RecvData(s)
	ferr := fanTar(in, sinks)
	in.CloseWithError(errors.New("relay stopped reading")) // ends the receiver
	results := make([]rpc.ImageRelayResult, len(sinks))
	for i, k := range sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ferr != nil {
				k.fail(rpc.Errorf(rpc.CodeInvalidArgument, "image archive from the client: %v", ferr))
			}
			results[i] = k.finish(ferr != nil)
		}()
	}
	wg.Wait()
	stop()
	return s.Send(rpc.StreamFrame{Event: mustEvent(rpc.ImageRelayEvent{Results: results})})
}

func validateRelay(req rpc.ImageRelayRequest) error {
	if len(req.Targets) == 0 {
		return rpc.InvalidField("targets", "at least one Machine is required")
	}
	if len(req.Targets) > maxRelayTargets {
		return rpc.InvalidField("targets", "at most %d Machines", maxRelayTargets)
	}
	seen := map[string]bool{}
	for i, t := range req.Targets {
		f := fmt.Sprintf("targets[%d].machine_id", i)
		if t.MachineID == "" {
			return rpc.InvalidField(f, "required")
		}
		if seen[t.MachineID] {
			return rpc.InvalidField(f, "%q is named twice", t.MachineID)
		}
		seen[t.MachineID] = true
	}
	return nil
}

func mustEvent(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed shapes are marshalled
	}
	return b
}

// RecvData turns a stream's client data frames into a reader that ends
// at the client's EOF frame (or fails when the stream breaks first).
// Closing the reader stops the receiver.
func RecvData(s rpc.StreamConn) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(rpc.ReadUpload(s, func(b []byte) error {
			_, err := pw.Write(b)
			return err
		}))
	}()
	return pr
}

// sink is one target's copy of the archive.
type sink struct {
	id, name string
	skip     map[string]bool
	tw       *tar.Writer
	bw       *bufio.Writer
	n        atomic.Int64 // bytes written towards the target
	err      *rpc.Error   // the first failure; later writes are dropped
	// done closes the target's input and waits for its load.
	done    func() (rpc.ImageLoadResult, error)
	release func()
}

func failedSink(t rpc.ImageRelayTarget, name string, err *rpc.Error) *sink {
	return &sink{id: t.MachineID, name: name, err: err.With("machine_id", t.MachineID), release: func() {}}
}

func openSink(ctx context.Context, env RelayEnv, peers []rpc.Peer, t rpc.ImageRelayTarget) *sink {
	p, err := rpc.Resolve(peers, t.MachineID)
	if err != nil {
		return failedSink(t, "", rpc.Errorf(rpc.CodeNotFound, "machine %s: %v", t.MachineID, err))
	}
	k := &sink{id: p.ID, name: p.Name, skip: map[string]bool{}}
	for _, n := range t.Skip {
		k.skip[n] = true
	}
	var w io.Writer
	if p.ID == env.Self {
		pr, pw := io.Pipe()
		type loaded struct {
			res rpc.ImageLoadResult
			err error
		}
		ch := make(chan loaded, 1)
		go func() {
			res, err := env.Load(ctx, pr)
			pr.CloseWithError(fmt.Errorf("docker load ended: %v", err)) // unblocks the writer
			ch <- loaded{res, err}
		}()
		w = pw
		k.done = func() (rpc.ImageLoadResult, error) {
			pw.Close()
			l := <-ch
			return l.res, l.err
		}
		k.release = func() { pw.CloseWithError(errors.New("relay ended")) } // idempotent
	} else {
		c, err := env.Dial(ctx, p)
		if err != nil {
			return failedSink(t, p.Name, rpc.Errorf(rpc.CodeUnavailable, "machine %s at %s: %v", p.Name, p.Address, err))
		}
		st, err := rpc.Open(ctx, c, rpc.Target{}, rpc.LoadImage, rpc.None{})
		if err != nil {
			c.Close()
			return failedSink(t, p.Name, rpc.Errorf(rpc.CodeUnavailable, "machine %s: image_load: %v", p.Name, err))
		}
		// Bulk data goes raw, without base64 in JSON, where the target
		// reads it so.
		var ct rpc.Contract
		if rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.DescribeContract, rpc.None{}, &ct) == nil && slices.Contains(ct.Capabilities, rpc.CapStreamRawData) {
			st.SendRawData()
		}
		w = streamWriter{st}
		k.done = func() (rpc.ImageLoadResult, error) { return closeLoad(st) }
		var once sync.Once
		k.release = func() { once.Do(func() { st.Close(); c.Close() }) }
	}
	k.bw = bufio.NewWriterSize(w, chunk)
	k.tw = tar.NewWriter(countWriter{k.bw, &k.n})
	return k
}

// streamWriter sends each write as one data frame.
type streamWriter struct{ st *rpc.ClientStream }

func (w streamWriter) Write(p []byte) (int, error) {
	if err := w.st.Send(rpc.StreamFrame{Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeLoad ends an image_load upload and returns the Machine's answer;
// a stream the Machine already ended gives the Machine's own error.
func closeLoad(st *rpc.ClientStream) (rpc.ImageLoadResult, error) {
	var res rpc.ImageLoadResult
	st.CloseSend() // the answer below says what happened
	for {
		f, err := st.Recv()
		if err != nil {
			return res, err
		}
		if len(f.Event) > 0 {
			if ev, err := rpc.LoadImage.Event(f); err == nil { // a tolerant reader: the outcome is Done
				res = ev
			}
		}
		if f.Done {
			return res, nil
		}
	}
}

type countWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n.Add(int64(k))
	return k, err
}

func (k *sink) fail(err *rpc.Error) {
	if k.err == nil {
		k.err = err.With("machine_id", k.id)
	}
}

// write runs f unless the sink already failed, and keeps its failure.
func (k *sink) write(f func() error) {
	if k.err != nil {
		return
	}
	if err := f(); err != nil {
		k.fail(rpc.Errorf(rpc.CodeUnavailable, "machine %s: send: %v", k.name, err))
	}
}

// finish completes the target's load and reports it; abort ends the
// target's upload first, so it never loads a cut archive. A target whose
// stream broke reports the Machine's own answer when it has one.
func (k *sink) finish(abort bool) rpc.ImageRelayResult {
	r := rpc.ImageRelayResult{MachineID: k.id, MachineName: k.name, Bytes: k.n.Load()}
	if k.done == nil { // never opened
		r.Error = k.err
		return r
	}
	if abort {
		k.release()
	} else {
		k.write(k.bw.Flush)
	}
	failed := k.err
	res, err := k.done()
	r.Bytes = k.n.Load()
	var re *rpc.Error
	switch {
	case err == nil && failed == nil:
		r.Loaded = res.Loaded
	case abort:
		r.Error = failed
	case errors.As(err, &re):
		r.Error = re.With("machine_id", k.id)
	case failed != nil:
		r.Error = failed
	default:
		r.Error = rpc.Errorf(rpc.CodeUnavailable, "machine %s: %v", k.name, err).With("machine_id", k.id)
	}
	return r
}

// fanTar reads one tar archive and writes every entry to each sink that
// does not skip it. A sink that fails stops receiving; the others go on.
// The error is about the input archive only.
func fanTar(r io.Reader, sinks []*sink) error {
	tr := tar.NewReader(r)
	buf := make([]byte, chunk)
	for {
		h, err := tarsafe.Next(tr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		var to []*sink
		for _, k := range sinks {
			if k.err == nil && !k.skip[h.Name] {
				k.write(func() error { return k.tw.WriteHeader(h) })
				to = append(to, k)
			}
		}
		for {
			n, err := tr.Read(buf)
			if n > 0 {
				for _, k := range to {
					k.write(func() error { _, err := k.tw.Write(buf[:n]); return err })
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	for _, k := range sinks {
		k.write(k.tw.Close)
	}
	return nil
}
