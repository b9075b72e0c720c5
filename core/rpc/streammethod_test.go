package rpc

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// openRecorder is an Opener that keeps what Open sent.
type openRecorder struct {
	command string
	payload any
}

func (o *openRecorder) OpenStream(_ context.Context, _ Target, command string, payload any) (*ClientStream, error) {
	o.command, o.payload = command, payload
	return nil, nil
}

// TestOpenWire: a None request opens without a payload, as image_load's
// callers opened it; a typed one goes as its own value.
func TestOpenWire(t *testing.T) {
	o := &openRecorder{}
	Open(context.Background(), o, Target{}, LoadImage, None{}) // the recorder answers nil
	if o.command != CmdImageLoad || o.payload != nil {
		t.Fatalf("image_load opened as %q with %#v", o.command, o.payload)
	}
	Open(context.Background(), o, Target{}, Exec, ExecRequest{ID: "c1"}) // the recorder answers nil
	if o.command != CmdExec || o.payload.(ExecRequest).ID != "c1" {
		t.Fatalf("exec opened as %q with %#v", o.command, o.payload)
	}
}

// frameRecorder is a StreamConn that keeps what a handler sent.
type frameRecorder struct{ sent []StreamFrame }

func (r *frameRecorder) Send(f StreamFrame) error { r.sent = append(r.sent, f); return nil }
func (r *frameRecorder) Recv() (StreamFrame, error) {
	return StreamFrame{}, errors.New("no client frames")
}

// TestBindStreamDecodes: a typed stream handler gets its request decoded
// as Decode did (unknown fields ignored, a malformed one refused naming
// it), and Send puts the event on the wire as json.Marshal did.
func TestBindStreamDecodes(t *testing.T) {
	var got TailLogsRequest
	r := BindStream(TailLogs, func(_ context.Context, req TailLogsRequest, s StreamConn) error {
		got = req
		return TailLogs.Send(s, LogRecord{Time: 5, Stream: "stdout", Text: "hi", ContainerID: "c1"})
	})
	if r.Command != CmdTailLogs || r.Capability != CapTailLogs {
		t.Fatalf("route %s %s", r.Command, r.Capability)
	}
	conn := &frameRecorder{}
	if err := r.Handler(context.Background(), json.RawMessage(`{"tail":3,"service":"web","later":1}`), conn); err != nil || got.Tail != 3 || got.Service != "web" {
		t.Fatalf("tolerant read: %+v %v", got, err)
	}
	if len(conn.sent) != 1 || string(conn.sent[0].Event) != `{"time_unix_nano":5,"stream":"stdout","text":"hi","container_id":"c1"}` {
		t.Fatalf("sent %+v", conn.sent)
	}
	ev, err := TailLogs.Event(conn.sent[0])
	if err != nil || ev.Text != "hi" {
		t.Fatalf("event %+v %v", ev, err)
	}
	err = r.Handler(context.Background(), json.RawMessage(`{"tail":"three"}`), conn)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidArgument || e.Details["field"] != "tail" {
		t.Fatalf("malformed field: %v", err)
	}
	load := BindStream(LoadImage, func(context.Context, None, StreamConn) error { return nil })
	if err := load.Handler(context.Background(), nil, conn); err != nil {
		t.Fatalf("image_load without a payload: %v", err)
	}
}

// streamSamples is one request and one event of every streaming command,
// as typed values; testdata/streams.json holds their JSON, so a change of
// a stream's types that moves its wire shows as a diff there.
func streamSamples() map[string][2]any {
	return map[string][2]any{
		CmdImageLoad:         {None{}, ImageLoadResult{Bytes: 10, Loaded: []string{"Loaded image: a:1"}}},
		CmdImageRelay:        {ImageRelayRequest{Targets: []ImageRelayTarget{{MachineID: "m1", Skip: []string{"l1"}}}}, ImageRelayEvent{Progress: map[string]int64{"m1": 4}}},
		CmdPullImageProgress: {PullImageRequest{Image: "a:1"}, PullImageEvent{Progress: &PullProgress{Layers: 2, LayersDone: 1, Bytes: 5, Total: 9}}},
		CmdExec:              {ExecRequest{ID: "c1", Cmd: []string{"sh"}, TTY: true}, ExecExit{ExitCode: 0}},
		CmdRunContainer:      {RunContainerRequest{Detach: true}, RunEvent{Exited: &RunExited{ExitCode: 1, Removed: true}}},
		CmdTailLogs:          {TailLogsRequest{LogQuery: LogQuery{Service: "web"}, Tail: 10, Follow: true}, LogRecord{Time: 1, Stream: "stderr", Text: "x", ContainerID: "c1"}},
		CmdSendVolume:        {SendVolumeRequest{Volume: "db", Snapshot: "s1", RawData: true}, None{}},
		CmdReceiveVolume:     {ReceiveVolumeRequest{Volume: "db", Resumable: true}, VolumeReceived{Bytes: 7, Volume: Volume{Name: "db"}}},
		CmdSendVolumeTo:      {SendVolumeToRequest{Volume: "db", Snapshot: "s1", Target: "m2"}, VolumeTransfer{TargetID: "m2", Bytes: 7}},
		CmdUpgradeMachine:    {UpgradeRequest{Version: "1.2.0", SHA256: "ab", Size: 3}, UpgradeStarted{ID: "u1", From: "1.1.0", To: "1.2.0"}},
		CmdUpgradePlugin:     {UpgradeRequest{Version: "1.2.0", Plugin: "logstore"}, UpgradeStarted{ID: "u2", From: "1.1.0", To: "1.2.0"}},
	}
}

// TestStreamWireFixture: every declared stream has a sample, and its
// request and event encode as testdata/streams.json says; the request
// decodes back through the declared decoder.
func TestStreamWireFixture(t *testing.T) {
	samples := streamSamples()
	got := map[string]map[string]json.RawMessage{}
	for _, d := range Catalog() {
		if !d.Stream {
			continue
		}
		s, ok := samples[d.Name]
		if !ok {
			t.Errorf("stream %s has no sample in streamSamples", d.Name)
			continue
		}
		req, _ := json.Marshal(s[0])
		ev, _ := json.Marshal(s[1])
		if _, err := d.decode(req); err != nil {
			t.Errorf("%s: its sample request does not decode: %v", d.Name, err)
		}
		got[d.Name] = map[string]json.RawMessage{"request": req, "event": ev}
	}
	b, _ := json.MarshalIndent(got, "", "  ")
	b = append(b, '\n')
	path := filepath.Join("testdata", "streams.json")
	if *updateCatalog {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Errorf("a stream's wire moved (go test ./core/rpc -run TestStreamWireFixture -update to accept):\n%s", b)
	}
}
