package volumesend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/prereq"
)

// fakeTarget is a Machine's receive_volume as zfs receive -s behaves: a
// stream cut short keeps what arrived and a resume token (here: the
// offset), which the source's next stream continues from.
type fakeTarget struct {
	mu      sync.Mutex
	data    []byte // received so far, committed or partial
	token   string
	done    bool
	streams int
}

func (tg *fakeTarget) receive(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
	var req rpc.ReceiveVolumeRequest
	if err := rpc.Decode(rpc.CmdReceiveVolume, raw, &req); err != nil {
		return err
	}
	tg.mu.Lock()
	tg.streams++
	tg.mu.Unlock()
	for {
		f, err := s.Recv()
		tg.mu.Lock()
		if err != nil {
			if req.Resumable {
				tg.token = strconv.Itoa(len(tg.data))
			}
			tg.mu.Unlock()
			return err
		}
		if f.EOF {
			tg.token, tg.done = "", true
			n := len(tg.data)
			tg.mu.Unlock()
			b, _ := json.Marshal(rpc.VolumeReceived{Bytes: uint64(n), Volume: rpc.Volume{Name: req.Volume}})
			return s.Send(rpc.StreamFrame{Event: b})
		}
		tg.data = append(tg.data, f.Data...)
		tg.mu.Unlock()
	}
}

func (tg *fakeTarget) state() (data []byte, token string, done bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]byte(nil), tg.data...), tg.token, tg.done
}

// cutListener kills each connection after it has read limit bytes,
// while limit is set: a connection dropped mid-transfer.
type cutListener struct {
	net.Listener
	limit atomic.Int64
}

func (l *cutListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, limit: l.limit.Load()}, nil
}

type cutConn struct {
	net.Conn
	limit, n int64
}

func (c *cutConn) Read(b []byte) (int, error) {
	k, err := c.Conn.Read(b)
	c.n += int64(k)
	if c.limit > 0 && c.n > c.limit {
		c.Conn.Close()
		return 0, errors.New("cut")
	}
	return k, err
}

// events is the client side of send_volume_to: the frames Serve sends.
type events struct {
	mu sync.Mutex
	ev []rpc.VolumeTransfer
}

func (e *events) Send(f rpc.StreamFrame) error {
	var v rpc.VolumeTransfer
	if err := json.Unmarshal(f.Event, &v); err != nil {
		return err
	}
	e.mu.Lock()
	e.ev = append(e.ev, v)
	e.mu.Unlock()
	return nil
}

func (e *events) Recv() (rpc.StreamFrame, error) { select {} }

type fixture struct {
	src  []byte
	tg   *fakeTarget
	lis  *cutListener
	env  Env
	sent atomic.Int64 // bytes the source's plugin produced
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{src: bytes.Repeat([]byte("0123456789abcdef"), 1<<16), tg: &fakeTarget{}} // 1 MiB
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		prereq.Missing(t, "a loopback interface", err)
	}
	f.lis = &cutListener{Listener: l}
	srv := rpc.NewServer(rpc.Options{Local: func() (string, string) { return "m2id", "m2" }})
	srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdReceiveVolume, Capability: "ployz.volume.receive.v1", Handler: f.tg.receive})
	g := srv.GRPCServer()
	go g.Serve(f.lis)
	t.Cleanup(g.Stop)
	peers := []rpc.Peer{{ID: "m1id", Name: "m1"}, {ID: "m2id", Name: "m2", Address: "127.0.0.1:7569"}}
	f.env = Env{Self: "m1id", Tick: 5 * time.Millisecond,
		Peers: func(context.Context) ([]rpc.Peer, error) { return peers, nil },
		// The target's volume transport is the listener, wherever its
		// Machine RPC is.
		Dial: func(ctx context.Context, p rpc.Peer) (*rpc.Client, error) { return rpc.DialTCP(ctx, l.Addr().String()) },
		Send: f.send}
	return f
}

// send is the source's plugin: the stream from the start, or from a
// resume token's offset; slow enough for progress events.
func (f *fixture) send(ctx context.Context, req rpc.SendVolumeRequest, estimate func(uint64), data func([]byte) error) error {
	off := 0
	if req.ResumeToken != "" {
		off, _ = strconv.Atoi(req.ResumeToken)
	}
	estimate(uint64(len(f.src) - off))
	for i := off; i < len(f.src); i += 32 << 10 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := f.src[i:min(i+32<<10, len(f.src))]
		if err := data(b); err != nil {
			return err
		}
		f.sent.Add(int64(len(b)))
		time.Sleep(time.Millisecond)
	}
	return nil
}

func TestSendToTarget(t *testing.T) {
	f := newFixture(t)
	var ev events
	req := rpc.SendVolumeToRequest{Volume: "db", Snapshot: "s1", Target: "m2", Resumable: true}
	if err := Serve(context.Background(), req, &ev, f.env); err != nil {
		t.Fatal(err)
	}
	data, _, done := f.tg.state()
	if !done || !bytes.Equal(data, f.src) {
		t.Fatalf("target holds %d bytes (done %v), want the source's %d", len(data), done, len(f.src))
	}
	last := ev.ev[len(ev.ev)-1]
	if last.Received == nil || last.Received.Bytes != uint64(len(f.src)) || last.Bytes != uint64(len(f.src)) || last.TargetID != "m2id" {
		t.Fatalf("last event: %+v", last)
	}
	if len(ev.ev) < 2 || ev.ev[0].Received != nil || ev.ev[0].EstimatedBytes != uint64(len(f.src)) {
		t.Fatalf("no progress before the answer: %+v", ev.ev)
	}
}

// TestCutTransferResumes: the connection to the target drops mid-stream;
// Serve fails naming the target and how far it got, the target keeps a
// resume token, and a second send_volume_to from that token sends only
// the rest: the target ends with the whole stream.
func TestCutTransferResumes(t *testing.T) {
	f := newFixture(t)
	f.lis.limit.Store(256 << 10)
	req := rpc.SendVolumeToRequest{Volume: "db", Snapshot: "s1", Target: "m2", Resumable: true}
	err := Serve(context.Background(), req, &events{}, f.env)
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeUnavailable || !strings.Contains(e.Message, "send to m2 after") || e.Details["machine_id"] != "m2id" {
		t.Fatalf("a cut transfer: %v", err)
	}
	var token string
	for wait := time.Now().Add(5 * time.Second); token == "" && time.Now().Before(wait); time.Sleep(10 * time.Millisecond) {
		_, token, _ = f.tg.state()
	}
	if token == "" || token == "0" {
		t.Fatalf("the target kept no resume token (%q)", token)
	}
	f.lis.limit.Store(0)
	first := f.sent.Swap(0)
	req = rpc.SendVolumeToRequest{Volume: "db", ResumeToken: token, Target: "m2", Resumable: true}
	var ev events
	if err := Serve(context.Background(), req, &ev, f.env); err != nil {
		t.Fatal(err)
	}
	data, _, done := f.tg.state()
	if !done || !bytes.Equal(data, f.src) {
		t.Fatalf("after the resume the target holds %d bytes (done %v), want %d", len(data), done, len(f.src))
	}
	rest := f.sent.Load()
	if off, _ := strconv.Atoi(token); rest != int64(len(f.src)-off) || rest >= int64(len(f.src)) {
		t.Fatalf("resumed from %s: sent %d of %d (first try %d): restarted, not resumed", token, rest, len(f.src), first)
	}
	t.Logf("cut after %d bytes reached the target; the resume sent the other %d", len(f.src)-int(rest), rest)
}

func TestSourceFailureCutsTheUpload(t *testing.T) {
	f := newFixture(t)
	f.env.Send = func(_ context.Context, _ rpc.SendVolumeRequest, _ func(uint64), data func([]byte) error) error {
		if err := data([]byte("half")); err != nil {
			return err
		}
		return rpc.InvalidField("snapshot", "no snapshot %q", "s9")
	}
	err := Serve(context.Background(), rpc.SendVolumeToRequest{Volume: "db", Snapshot: "s9", Target: "m2", Resumable: true}, &events{}, f.env)
	var e *rpc.Error
	if !errors.As(err, &e) || e.Details["field"] != "snapshot" {
		t.Fatalf("the source's own refusal: %v", err)
	}
	// The cut reaches the target's receive (when it started at all) as
	// an error, never as the end of the stream.
	time.Sleep(200 * time.Millisecond)
	if _, _, done := f.tg.state(); done {
		t.Fatal("the target committed a stream the source failed")
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		raw, field string
	}{
		{`{"volume":"db","snapshot":"s1"}`, "target"},
		{`{"volume":"Bad/Name","snapshot":"s1","target":"m2"}`, "volume"},
		{`{"snapshot":"s1","target":"m2"}`, "volume"},
		{`{"volume":"db","target":"m2"}`, "snapshot"},
		{`{"volume":"db","snapshot":"s1","from_snapshot":"a b","target":"m2"}`, "from_snapshot"},
		{`{"volume":"db","snapshot":"s1","target":7}`, "target"},
		{`{"volume":"db","snapshot":"s1","target":"m2","resumable":"yes"}`, "resumable"},
	} {
		_, err := decode(json.RawMessage(c.raw))
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeInvalidArgument || e.Details["field"] != c.field {
			t.Errorf("%s: %v; want a refusal naming %s", c.raw, err, c.field)
		}
	}
	if _, err := decode(json.RawMessage(`{"volume":"db","resume_token":"1-ab","target":"m2"}`)); err != nil {
		t.Errorf("a resume without a snapshot: %v", err)
	}
	for _, c := range []struct{ target, field string }{{"m1", "target"}, {"nosuch", "target"}} {
		err := Serve(context.Background(), rpc.SendVolumeToRequest{Volume: "db", Snapshot: "s1", Target: c.target}, &events{}, f.env)
		var e *rpc.Error
		if !errors.As(err, &e) || e.Details["field"] != c.field {
			t.Errorf("target %s: %v; want a refusal naming %s", c.target, err, c.field)
		}
	}
}

// decode is what the daemon's send_volume_to route does with a payload:
// the declared request type's decoding, then Check.
func decode(raw json.RawMessage) (rpc.SendVolumeToRequest, error) {
	req, err := rpc.SendVolumeTo.DecodeRequest(raw)
	if err != nil {
		return req, err
	}
	return req, Check(req)
}
