package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// relayMachine is one Machine of a relay test: Machine RPC on a unix
// socket, image_load and image_relay served, and a Docker stand-in that
// records the archive entries each load received.
type relayMachine struct {
	id, sock string
	srv      *rpc.Server
	mu       sync.Mutex
	loaded   map[string]string // entry name -> content of the last load
	loads    int
	failLoad string // a load whose archive has this entry fails
}

func (m *relayMachine) load(_ context.Context, r io.Reader) (rpc.ImageLoadResult, error) {
	tr := tar.NewReader(r)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return rpc.ImageLoadResult{}, rpc.Errorf(rpc.CodeInvalidArgument, "docker load: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return rpc.ImageLoadResult{}, err
		}
		if h.Name == m.failLoad {
			return rpc.ImageLoadResult{}, rpc.Errorf(rpc.CodeInvalidArgument, "docker load: refused %s", h.Name)
		}
		got[h.Name] = string(b)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loaded, m.loads = got, m.loads+1
	return rpc.ImageLoadResult{Loaded: []string{"Loaded image: x:y"}}, nil
}

func relayCluster(t *testing.T, ids ...string) []*relayMachine {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "relay")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var ms []*relayMachine
	var peers []rpc.Peer
	for _, id := range ids {
		m := &relayMachine{id: id, sock: filepath.Join(dir, id+".sock")}
		ms = append(ms, m)
		peers = append(peers, rpc.Peer{ID: id, Name: "name-" + id, Address: m.sock})
	}
	peers = append(peers, rpc.Peer{ID: "gone", Name: "name-gone", Address: filepath.Join(dir, "gone.sock")})
	for _, m := range ms {
		m.srv = rpc.NewServer(rpc.Options{Local: func() (string, string) { return m.id, "name-" + m.id }})
		m.srv.HandleStream(rpc.StreamRoute{Command: rpc.CmdImageLoad, Capability: rpc.CapImageLoad,
			Handler: func(ctx context.Context, _ json.RawMessage, s rpc.StreamConn) error {
				res, err := m.load(ctx, RecvData(s))
				if err != nil {
					return err
				}
				return s.Send(rpc.StreamFrame{Event: mustEvent(res)})
			}})
		env := RelayEnv{Self: m.id, Tick: 10 * time.Millisecond,
			Peers: func(context.Context) ([]rpc.Peer, error) { return peers, nil },
			Dial:  func(_ context.Context, p rpc.Peer) (*rpc.Client, error) { return rpc.DialUnix(p.Address) },
			Load:  m.load}
		m.srv.HandleStream(rpc.BindStream(rpc.RelayImage, func(ctx context.Context, req rpc.ImageRelayRequest, s rpc.StreamConn) error {
			return ServeRelay(ctx, req, s, env)
		}))
		lis, err := net.Listen("unix", m.sock)
		if err != nil {
			t.Fatal(err)
		}
		g := m.srv.GRPCServer()
		go g.Serve(lis) // ends with Stop
		t.Cleanup(g.Stop)
	}
	return ms
}

// testArchive writes a docker-save-like archive: two layers and a
// manifest, with layer content big enough to span several frames.
func testArchive(t *testing.T) (*savedImage, map[string]string) {
	t.Helper()
	entries := map[string]string{
		"aaa/layer.tar": strings.Repeat("A", 600<<10),
		"bbb/layer.tar": strings.Repeat("B", 300<<10),
		"manifest.json": `[{"Layers":["aaa/layer.tar","bbb/layer.tar"]}]`,
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"aaa/layer.tar", "bbb/layer.tar", "manifest.json"} {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(entries[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(entries[n]))
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "image.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	layers, err := manifestLayers(p)
	if err != nil {
		t.Fatal(err)
	}
	return &savedImage{path: p, size: int64(buf.Len()), layers: layers, diffs: []string{"sha256:a", "sha256:b"}}, entries
}

// TestRelayEachTargetItsCopy relays one archive through m1 to m1 itself,
// m2 (which holds the first layer) and m3, and to a Machine that cannot
// be reached: each reachable one loads the entries it lacks, exactly, and
// the unreachable one is named while the others still get the image.
func TestRelayEachTargetItsCopy(t *testing.T) {
	ms := relayCluster(t, "m1", "m2", "m3")
	saved, entries := testArchive(t)
	entry, err := rpc.DialUnix(ms[0].sock)
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	out := []Result{{MachineID: "m1", MachineName: "name-m1"}, {MachineID: "m2", MachineName: "name-m2"},
		{MachineID: "m3", MachineName: "name-m3"}, {MachineID: "gone", MachineName: "name-gone"}}
	skips := map[int]map[string]bool{1: saved.skip(map[string]bool{chainIDs(saved.diffs)[0]: true})}
	var mu sync.Mutex
	seen := map[string]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	relayed(ctx, entry, saved, out, []int{0, 1, 2, 3}, skips, true, func(m string, sent, total int64) {
		mu.Lock()
		defer mu.Unlock()
		seen[m] = max(seen[m], sent)
		if total != saved.size {
			t.Errorf("progress total %d, want %d", total, saved.size)
		}
	})
	for i, want := range []string{"pushed", "pushed", "pushed", "failed"} {
		if out[i].Outcome != want {
			t.Errorf("%s: %+v, want %s", out[i].MachineName, out[i], want)
		}
	}
	if !strings.Contains(out[3].Error, "name-gone") {
		t.Errorf("unreachable target's error %q does not name it", out[3].Error)
	}
	if out[1].SkippedLayers != 1 || out[1].Bytes >= out[0].Bytes {
		t.Errorf("m2 held a layer: %+v, m1 %+v", out[1], out[0])
	}
	for i, m := range ms {
		want := maps.Clone(entries)
		if i == 1 {
			delete(want, "aaa/layer.tar")
		}
		if !maps.Equal(m.loaded, want) || m.loads != 1 {
			t.Errorf("%s loaded %d times entries %v, want %v", m.id, m.loads, slices.Sorted(maps.Keys(m.loaded)), slices.Sorted(maps.Keys(want)))
		}
		if seen["name-"+m.id] != saved.size {
			t.Errorf("progress of %s ended at %d, want %d", m.id, seen["name-"+m.id], saved.size)
		}
	}
}

// TestRelayOneTargetFails: a target whose Docker refuses the archive is
// named with its Docker's answer; the others load it.
func TestRelayOneTargetFails(t *testing.T) {
	ms := relayCluster(t, "m1", "m2", "m3")
	ms[2].failLoad = "bbb/layer.tar"
	saved, _ := testArchive(t)
	entry, err := rpc.DialUnix(ms[0].sock)
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	out := []Result{{MachineID: "m2", MachineName: "name-m2"}, {MachineID: "m3", MachineName: "name-m3"}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	relayed(ctx, entry, saved, out, []int{0, 1}, nil, false, nil)
	if out[0].Outcome != "pushed" || ms[1].loads != 1 {
		t.Errorf("m2: %+v after %d loads", out[0], ms[1].loads)
	}
	if out[1].Outcome != "failed" || !strings.Contains(out[1].Error, "refused bbb/layer.tar") {
		t.Errorf("m3: %+v, want its Docker's refusal", out[1])
	}
	if ms[0].loads != 0 {
		t.Errorf("the entry loaded the image without being a target")
	}
}

// TestRelayRefusals: requests that cannot be served are refused naming
// the field, and a broken archive fails every target without any load.
func TestRelayRefusals(t *testing.T) {
	ms := relayCluster(t, "m1", "m2")
	entry, err := rpc.DialUnix(ms[0].sock)
	if err != nil {
		t.Fatal(err)
	}
	defer entry.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		req   rpc.ImageRelayRequest
		field string
	}{
		{rpc.ImageRelayRequest{}, "targets"},
		{rpc.ImageRelayRequest{Targets: []rpc.ImageRelayTarget{{MachineID: ""}}}, "targets[0].machine_id"},
		{rpc.ImageRelayRequest{Targets: []rpc.ImageRelayTarget{{MachineID: "m1"}, {MachineID: "m1"}}}, "targets[1].machine_id"},
	} {
		st, err := entry.OpenStream(ctx, rpc.Target{}, rpc.CmdImageRelay, c.req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Recv()
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != rpc.CodeInvalidArgument || re.Details["field"] != c.field {
			t.Errorf("%+v: %v, want invalid %s", c.req, err, c.field)
		}
		st.Close()
	}

	st, err := entry.OpenStream(ctx, rpc.Target{}, rpc.CmdImageRelay, rpc.ImageRelayRequest{Targets: []rpc.ImageRelayTarget{{MachineID: "m1"}, {MachineID: "m2"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if f, err := st.Recv(); err != nil || !relayEvent(f).Ready {
		t.Fatalf("want ready, got %+v %v", f, err)
	}
	st.Send(rpc.StreamFrame{Data: bytes.Repeat([]byte("not a tar archive "), 100)})
	st.CloseSend()
	for {
		f, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if res := relayEvent(f).Results; res != nil {
			for _, r := range res {
				if r.Error == nil || !strings.Contains(r.Error.Message, "image archive from the client") {
					t.Errorf("%s: %+v, want the broken archive named", r.MachineID, r)
				}
			}
			break
		}
	}
	if ms[0].loads+ms[1].loads != 0 {
		t.Errorf("a broken archive was loaded")
	}
}
