package volumerun

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/prereq"
)

// twoMachines is an entry m1 (this process's, over a unix socket)
// forwarding to m2 over loopback TCP: real Machine RPC servers.
type twoMachines struct {
	m1, m2 *rpc.Server
	rn     *Runner
	events events
}

func newTwoMachines(t *testing.T) *twoMachines {
	t.Helper()
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		prereq.Missing(t, "a loopback TCP listener", err)
	}
	peers := []rpc.Peer{{ID: "m1id", Name: "m1"}, {ID: "m2id", Name: "m2", Address: l2.Addr().String()}}
	list := func(context.Context) ([]rpc.Peer, error) { return peers, nil }
	tm := &twoMachines{
		m1: rpc.NewServer(rpc.Options{Local: func() (string, string) { return "m1id", "m1" }, Peers: list}),
		m2: rpc.NewServer(rpc.Options{Local: func() (string, string) { return "m2id", "m2" }, Peers: list}),
	}
	g2 := tm.m2.GRPCServer()
	go g2.Serve(l2)
	t.Cleanup(g2.Stop)
	sock := filepath.Join(t.TempDir(), "s")
	l1, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g1 := tm.m1.GRPCServer()
	go g1.Serve(l1)
	t.Cleanup(g1.Stop)
	ent, err := rpc.DialUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ent.Close() })
	st, err := operator.Open(filepath.Join(t.TempDir(), "operator.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm.rn = &Runner{Entry: ent, Store: st, Context: "test", OnEvent: tm.events.add}
	return tm
}

func event(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// TestTransferResumesDirectCut: a Mirror run's send step goes Machine to
// Machine (both advertise send_volume_to); the first stream is cut on
// the way, the step reads the target's resume token and continues from
// it, not from zero, and records both transfers. Cut twice (the rest cut
// too, before a byte), the third and last transfer still completes the
// step.
func TestTransferResumesDirectCut(t *testing.T) {
	for _, cuts := range []int{1, 2} {
		t.Run(strconv.Itoa(cuts), func(t *testing.T) { transferCut(t, cuts) })
	}
}

func transferCut(t *testing.T, cuts int) {
	tm := newTwoMachines(t)
	var mu sync.Mutex
	var reqs []rpc.SendVolumeToRequest
	token := ""
	tm.m1.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolumeTo, Capability: rpc.CapSendVolumeTo, Handler: func(_ context.Context, raw json.RawMessage, s rpc.StreamConn) error {
		var req rpc.SendVolumeToRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return err
		}
		mu.Lock()
		reqs = append(reqs, req)
		n := len(reqs)
		mu.Unlock()
		if n == 2 && cuts == 2 { // the rest drops before a byte
			return rpc.Errorf(rpc.CodeUnavailable, "send to m2 after 0 bytes: connection aborted")
		}
		if n == 1 { // the stream drops after 6000 bytes reached m2
			if err := s.Send(rpc.StreamFrame{Event: event(rpc.VolumeTransfer{TargetID: "m2id", Bytes: 6000, EstimatedBytes: 10000})}); err != nil {
				return err
			}
			mu.Lock()
			token = "tok-6000"
			mu.Unlock()
			return rpc.Errorf(rpc.CodeUnavailable, "send to m2 after 6000 bytes: connection reset")
		}
		v := rpc.Volume{Name: "db", Snapshots: []rpc.VolumeSnapshot{{Name: "run-1", GUID: "g1"}}}
		return s.Send(rpc.StreamFrame{Event: event(rpc.VolumeTransfer{TargetID: "m2id", Bytes: 4000, Received: &rpc.VolumeReceived{Bytes: 4000, Volume: v}})})
	}})
	// m2 serves the transport too, and shows its resume token.
	tm.m2.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolumeTo, Capability: rpc.CapSendVolumeTo, Handler: func(context.Context, json.RawMessage, rpc.StreamConn) error { return nil }})
	tm.m2.Handle(rpc.Route{Command: rpc.CmdInspectVolume, Capability: "ployz.volume.inspect.v1", Handler: func(context.Context, json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		return rpc.Volume{Name: "db", ResumeToken: token, Snapshots: []rpc.VolumeSnapshot{}}, nil
	}})

	run, err := tm.rn.Store.BeginVolumeRun("test", "db", "mirror", "m2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := &volumeRun{Runner: tm.rn, ctx: context.Background(), run: run, waits: tm.rn.waits.orDefault()}
	wv := rpc.Volume{Name: "db", Snapshots: []rpc.VolumeSnapshot{{Name: "run-1", GUID: "g1"}}}
	if err := r.transfer("m1", wv, "run-1", "m2", nil); err != nil {
		t.Fatalf("transfer: %v\n%s", err, tm.events.String())
	}
	if len(reqs) != 1+cuts || reqs[0].Snapshot != "run-1" || reqs[0].ResumeToken != "" || reqs[cuts].ResumeToken != "tok-6000" || reqs[cuts].Target != "m2" || !reqs[cuts].Resumable {
		t.Fatalf("send_volume_to requests: %+v", reqs)
	}
	st := r.run.Steps[0]
	if st.Outcome != operator.RunDone || st.Bytes != 10000 || !strings.Contains(st.Detail, "full run-1") || !strings.Contains(st.Detail, "the rest of a cut transfer: 3.906KiB direct") {
		t.Fatalf("send step: %+v", st)
	}
	if out := tm.events.String(); !strings.Contains(out, "continuing from m2's resume token") || !strings.Contains(out, "m1 → m2 full run-1: 5.859KiB of ~9.766KiB") || !strings.Contains(out, "ETA") {
		t.Fatalf("progress:\n%s", out)
	}
	t.Logf("progress:\n%s", tm.events.String())
}

// TestTransferFallsBackToRelay: a source from before send_volume_to
// gets the stream through this CLI (send_volume into receive_volume).
func TestTransferFallsBackToRelay(t *testing.T) {
	tm := newTwoMachines(t)
	tm.m1.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolume, Capability: "ployz.volume.send.v1", Handler: func(_ context.Context, _ json.RawMessage, s rpc.StreamConn) error {
		return s.Send(rpc.StreamFrame{Data: []byte("stream")})
	}})
	var got []byte
	tm.m2.HandleStream(rpc.StreamRoute{Command: rpc.CmdReceiveVolume, Capability: "ployz.volume.receive.v1", Handler: func(_ context.Context, _ json.RawMessage, s rpc.StreamConn) error {
		for {
			f, err := s.Recv()
			if err != nil {
				return err
			}
			if f.EOF {
				return s.Send(rpc.StreamFrame{Event: event(rpc.VolumeReceived{Bytes: uint64(len(got)), Volume: rpc.Volume{Name: "db"}})})
			}
			got = append(got, f.Data...)
		}
	}})
	tm.m2.HandleStream(rpc.StreamRoute{Command: rpc.CmdSendVolumeTo, Capability: rpc.CapSendVolumeTo, Handler: func(context.Context, json.RawMessage, rpc.StreamConn) error { return nil }})
	out, err := tm.rn.Copy(context.Background(), "m1", "m2", rpc.SendVolumeRequest{Volume: "db", Snapshot: "s1"})
	if err != nil || out.Direct || out.Bytes != 6 || string(got) != "stream" || out.Got.Volume.Name != "db" {
		t.Fatalf("relay: %+v, %v, target got %q", out, err, got)
	}
	if ev := tm.events.String(); !strings.Contains(ev, "m1 → m2 full s1: 6B") {
		t.Fatalf("progress: %q", ev)
	}
}
