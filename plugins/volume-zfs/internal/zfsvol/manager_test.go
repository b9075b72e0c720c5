package zfsvol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

// recordedPool is the pool the session was recorded on: the VM lab
// Machine's ("ployz", one virtual disk).
const recordedPool = "ployz"

// TestManagerAgainstRecordedZFS drives the Volume service through a
// volume's life against the zfs double (zfsdouble_test.go), which
// answers with what the real zfs and zpool printed for the same calls on
// a VM lab Machine (testdata/zfs-session.json): a different command, in
// another order or with other arguments or stdin, fails it. After
// changing which commands Manager runs, re-record it on a VM lab Machine
// (a fresh pool named ployz) with `make record-zfs-session`
// (packaging/record-zfs-session.sh), which runs this test there as root
// with PLOYZ_ZFSDOUBLE_RECORD=DIR and copies DIR into testdata/.
//
// Recording, the test also writes the volumes' data through their
// mountpoints and holds one busy: host actions that are no zfs command,
// so replay has nothing to do for them.
func TestManagerAgainstRecordedZFS(t *testing.T) {
	recording := zfsDouble(t)
	onHost := func(what string, f func() error) {
		t.Helper()
		if !recording {
			return
		}
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ctx := context.Background()
	m := &Manager{}
	s := &Server{M: m}
	code := func(t *testing.T, err error, want codes.Code, words ...string) {
		t.Helper()
		if status.Code(err) != want {
			t.Fatalf("got %v, want %v", err, want)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%v does not name %q", err, w)
			}
		}
	}
	get := func(t *testing.T, name string) *volumev1.VolumeInfo {
		t.Helper()
		r, err := s.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: name})
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return r.GetVolume()
	}

	t.Run("pool", func(t *testing.T) {
		// No pool: refused naming the label, without a command run.
		_, err := s.ListVolumes(ctx, &volumev1.ListVolumesRequest{})
		code(t, err, codes.FailedPrecondition, "ployz.zfs.pool")
		if p, err := s.Pool(ctx, &volumev1.PoolRequest{}); err != nil || p.GetConfigured() {
			t.Fatalf("pool without one: %+v, %v", p, err)
		}
		_, err = s.Pool(ctx, &volumev1.PoolRequest{Pool: "a/b"})
		code(t, err, codes.InvalidArgument, "pool")
		// A pool the Machine does not have: zpool's own words.
		m.SetPool("nosuchpool")
		_, err = s.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: "db"})
		code(t, err, codes.FailedPrecondition, `"nosuchpool"`, "does not exist")
		p, err := s.Pool(ctx, &volumev1.PoolRequest{Pool: recordedPool})
		if err != nil || !p.GetConfigured() || p.GetHealth() != "ONLINE" || p.GetSizeBytes() == 0 || p.GetFreeBytes() == 0 || p.GetFreeBytes() > p.GetSizeBytes() {
			t.Fatalf("pool %s: %+v, %v", recordedPool, p, err)
		}
		m.SetPool(recordedPool)
		if m.Pool() != recordedPool {
			t.Fatalf("Pool() = %q", m.Pool())
		}
		ls, err := s.ListVolumes(ctx, &volumev1.ListVolumesRequest{})
		if err != nil || len(ls.GetVolumes()) != 0 {
			t.Fatalf("list before any volume: %+v, %v", ls, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	var s1 *volumev1.SnapshotInfo
	t.Run("create-snapshot", func(t *testing.T) {
		for _, c := range []struct {
			req  *volumev1.CreateVolumeRequest
			word string
		}{
			{&volumev1.CreateVolumeRequest{Name: "Bad/Name", SizeBytes: 64 << 20}, "name"},
			{&volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 1000}, "size_bytes"},
			{&volumev1.CreateVolumeRequest{Name: "db", Options: map[string]string{"compression": "lz4"}}, "options"},
		} {
			_, err := s.CreateVolume(ctx, c.req)
			code(t, err, codes.InvalidArgument, c.word)
		}
		_, err := s.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: "db"})
		code(t, err, codes.NotFound, `"db"`)
		r, err := s.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 64 << 20})
		v := r.GetVolume()
		if err != nil || v.GetDataset() != "ployz/ployz/volumes/db" || v.GetSizeBytes() != 64<<20 || v.GetMountpoint() != "/var/lib/ployz/volumes/db" ||
			v.GetCreatedUnixNanos() == 0 || v.GetReadOnly() || len(v.GetSnapshots()) != 0 || v.GetResumeToken() != "" {
			t.Fatalf("create db: %+v, %v", v, err)
		}
		// The same again is answered as it is; another size clashes.
		if r, err := s.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 64 << 20}); err != nil || r.GetVolume().GetDataset() != v.GetDataset() {
			t.Fatalf("create db again: %+v, %v", r, err)
		}
		_, err = s.CreateVolume(ctx, &volumev1.CreateVolumeRequest{Name: "db", SizeBytes: 128 << 20})
		code(t, err, codes.AlreadyExists, "67108864")
		onHost("write blob", func() error { return os.WriteFile(Mountpoint("db")+"/blob", pattern(1<<20), 0o644) })
		sr, err := s.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: "db", Snapshot: "s1"})
		if err != nil || sr.GetSnapshot() != "s1" || sr.GetCreatedUnixNanos() == 0 {
			t.Fatalf("snapshot s1: %+v, %v", sr, err)
		}
		_, err = s.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: "db", Snapshot: "s1"})
		code(t, err, codes.AlreadyExists, `"s1"`)
		_, err = s.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: "db", Snapshot: "no/pe"})
		code(t, err, codes.InvalidArgument, "snapshot")
		_, err = s.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: "nosuch", Snapshot: "s1"})
		code(t, err, codes.NotFound, `"nosuch"`)
		onHost("write more", func() error { return os.WriteFile(Mountpoint("db")+"/more", []byte("more\n"), 0o644) })
		if _, err := s.Snapshot(ctx, &volumev1.SnapshotRequest{Volume: "db", Snapshot: "s2"}); err != nil {
			t.Fatal(err)
		}
		v = get(t, "db")
		if !slices.Equal(v.GetSnapshots(), []string{"s1", "s2"}) || v.GetUsedBytes() < 1<<20 {
			t.Fatalf("db after s2: %+v", v)
		}
		s1 = v.GetSnapshotDetails()[0]
		if s1.GetGuid() == "" || s1.GetCreatedUnixNanos() == 0 {
			t.Fatalf("s1's details: %+v", s1)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	var full1, inc12, full2 []byte
	t.Run("send", func(t *testing.T) {
		var est uint64
		full1, est = send(t, s, &volumev1.SendRequest{Volume: "db", Snapshot: "s1", Estimate: true})
		if len(full1) < 1<<20 || est < 1<<20 || est > 2*uint64(len(full1)) {
			t.Fatalf("full s1: %d bytes, estimated %d", len(full1), est)
		}
		inc12, _ = send(t, s, &volumev1.SendRequest{Volume: "db", Snapshot: "s2", FromSnapshot: "s1"})
		if len(inc12) == 0 || len(inc12) > 1<<20 {
			t.Fatalf("incremental s1 → s2: %d bytes", len(inc12))
		}
		full2, _ = send(t, s, &volumev1.SendRequest{Volume: "db", Snapshot: "s2"})
		for _, c := range []struct {
			req  *volumev1.SendRequest
			want codes.Code
			word string
		}{
			{&volumev1.SendRequest{Volume: "db", Snapshot: "s9"}, codes.NotFound, `"s9"`},
			{&volumev1.SendRequest{Volume: "db", Snapshot: "s2", FromSnapshot: "s0"}, codes.NotFound, "from_snapshot"},
			{&volumev1.SendRequest{Volume: "db", Snapshot: "s2", FromSnapshot: "S!"}, codes.InvalidArgument, "from_snapshot"},
			{&volumev1.SendRequest{Volume: "db", Snapshot: ""}, codes.InvalidArgument, "snapshot"},
			{&volumev1.SendRequest{Volume: "", Snapshot: "s1"}, codes.InvalidArgument, "volume"},
			{&volumev1.SendRequest{Volume: "nosuch", Snapshot: "s1"}, codes.NotFound, `"nosuch"`},
		} {
			err := s.Send(c.req, &sendStream{ctx: ctx})
			code(t, err, c.want, c.word)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("receive", func(t *testing.T) {
		r, err := receive(s, "copy", false, full1)
		if err != nil || r.GetBytes() != uint64(len(full1)) || r.GetVolume().GetSizeBytes() != 64<<20 ||
			r.GetVolume().GetMountpoint() != "/var/lib/ployz/volumes/copy" || len(r.GetVolume().GetSnapshotDetails()) != 1 {
			t.Fatalf("full s1 into copy: %+v, %v", r, err)
		}
		if g := r.GetVolume().GetSnapshotDetails()[0].GetGuid(); g != s1.GetGuid() {
			t.Fatalf("copy's s1 has guid %s, db's %s", g, s1.GetGuid())
		}
		if r, err = receive(s, "copy", false, inc12); err != nil || !slices.Equal(r.GetVolume().GetSnapshots(), []string{"s1", "s2"}) {
			t.Fatalf("incremental into copy: %+v, %v", r, err)
		}
		// A full stream into a volume that exists is refused.
		_, err = receive(s, "copy", false, full1)
		code(t, err, codes.FailedPrecondition, `receive into "copy"`)
		// Not a stream at all: refused, and nothing is left.
		_, err = receive(s, "junk", false, []byte("this is no zfs stream\n"))
		code(t, err, codes.FailedPrecondition, `"junk"`)
		_, err = s.GetVolume(ctx, &volumev1.GetVolumeRequest{Name: "junk"})
		code(t, err, codes.NotFound, `"junk"`)
		_, err = receive(s, "Bad/Name", false, full1)
		code(t, err, codes.InvalidArgument, "volume")
		err = s.Receive(&receiveStream{ctx: ctx})
		code(t, err, codes.InvalidArgument, "header")
	})

	t.Run("resume", func(t *testing.T) {
		// Half of s2's full stream, then the stream breaks: the receive
		// leaves a token naming db@s2.
		_, err := receive(s, "cut", true, full2[:len(full2)/2], errors.New("connection cut"))
		code(t, err, codes.FailedPrecondition, `receive into "cut"`)
		tok := get(t, "cut").GetResumeToken()
		if tok == "" {
			t.Fatal("no resume token on cut after half a stream")
		}
		// The token resumes db's stream, not copy's.
		err = s.Send(&volumev1.SendRequest{Volume: "copy", ResumeToken: tok}, &sendStream{ctx: ctx})
		code(t, err, codes.InvalidArgument, "resume_token", "ployz/ployz/volumes/db@s2")
		err = s.Send(&volumev1.SendRequest{Volume: "db", ResumeToken: "1-0-0-0"}, &sendStream{ctx: ctx})
		code(t, err, codes.FailedPrecondition, "resume_token")
		rest, _ := send(t, s, &volumev1.SendRequest{Volume: "db", ResumeToken: tok})
		if len(rest) == 0 || len(rest) >= len(full2) {
			t.Fatalf("the rest is %d bytes of %d: not resumed", len(rest), len(full2))
		}
		r, err := receive(s, "cut", true, rest)
		v := r.GetVolume()
		if err != nil || v.GetResumeToken() != "" || !slices.Equal(v.GetSnapshots(), []string{"s2"}) || v.GetMountpoint() != "/var/lib/ployz/volumes/cut" {
			t.Fatalf("the rest into cut: %+v, %v", r, err)
		}
	})

	t.Run("readonly-prune", func(t *testing.T) {
		r, err := s.SetReadOnly(ctx, &volumev1.SetReadOnlyRequest{Name: "cut", ReadOnly: true})
		if err != nil || !r.GetVolume().GetReadOnly() {
			t.Fatalf("readonly on: %+v, %v", r, err)
		}
		if r, err = s.SetReadOnly(ctx, &volumev1.SetReadOnlyRequest{Name: "cut"}); err != nil || r.GetVolume().GetReadOnly() {
			t.Fatalf("readonly off: %+v, %v", r, err)
		}
		_, err = s.SetReadOnly(ctx, &volumev1.SetReadOnlyRequest{Name: "nosuch"})
		code(t, err, codes.NotFound, `"nosuch"`)
		// s1 pruned with a bookmark; pruned again, nothing to do.
		for range 2 {
			d, err := s.DestroySnapshot(ctx, &volumev1.DestroySnapshotRequest{Volume: "db", Snapshot: "s1", Bookmark: true})
			v := d.GetVolume()
			if err != nil || !slices.Equal(v.GetSnapshots(), []string{"s2"}) || len(v.GetBookmarks()) != 1 || v.GetBookmarks()[0].GetName() != "s1" || v.GetBookmarks()[0].GetGuid() != s1.GetGuid() {
				t.Fatalf("prune s1: %+v, %v", d, err)
			}
		}
		_, err = s.DestroySnapshot(ctx, &volumev1.DestroySnapshotRequest{Volume: "db", Snapshot: "-x"})
		code(t, err, codes.InvalidArgument, "snapshot")
		// An incremental from the bookmark: what copy already received.
		inc, _ := send(t, s, &volumev1.SendRequest{Volume: "db", Snapshot: "s2", FromSnapshot: "s1", Estimate: true})
		if len(inc) == 0 || len(inc) > 1<<20 {
			t.Fatalf("incremental from bookmark s1: %d bytes", len(inc))
		}
	})

	t.Run("list-remove", func(t *testing.T) {
		ls, err := s.ListVolumes(ctx, &volumev1.ListVolumesRequest{})
		var names []string
		for _, v := range ls.GetVolumes() {
			names = append(names, v.GetName())
		}
		slices.Sort(names)
		if err != nil || !slices.Equal(names, []string{"copy", "cut", "db"}) {
			t.Fatalf("list: %q, %v", names, err)
		}
		// A process working in db's mountpoint keeps it busy.
		var hold *exec.Cmd
		onHost("hold db", func() error {
			hold = exec.Command("sleep", "600")
			hold.Dir = Mountpoint("db")
			return hold.Start()
		})
		_, err = s.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: "db"})
		code(t, err, codes.FailedPrecondition, "in use")
		onHost("release db", func() error { hold.Process.Kill(); hold.Wait(); return nil }) // killed on purpose
		for _, name := range []string{"db", "copy", "cut"} {
			if _, err := s.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: name}); err != nil {
				t.Fatalf("remove %s: %v", name, err)
			}
		}
		_, err = s.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: "db"})
		code(t, err, codes.NotFound, `"db"`)
		_, err = s.RemoveVolume(ctx, &volumev1.RemoveVolumeRequest{Name: ".."})
		code(t, err, codes.InvalidArgument, "name")
		if ls, err := s.ListVolumes(ctx, &volumev1.ListVolumesRequest{}); err != nil || len(ls.GetVolumes()) != 0 {
			t.Fatalf("list after remove: %+v, %v", ls, err)
		}
	})
}

// pattern is n bytes of a short repeating sequence: data a stream
// carries whole, which the recorded gzip copy keeps small.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// send runs Server.Send and answers the stream's bytes and its estimate.
func send(t *testing.T, s *Server, req *volumev1.SendRequest) ([]byte, uint64) {
	t.Helper()
	st := &sendStream{ctx: context.Background()}
	if err := s.Send(req, st); err != nil {
		t.Fatalf("send %+v: %v", req, err)
	}
	if req.GetEstimate() && st.estimate == 0 {
		t.Fatalf("send %+v: no estimate first", req)
	}
	return st.data.Bytes(), st.estimate
}

// receive runs Server.Receive on a stream of data in two chunks (the
// header carrying the first), ending with io.EOF or end[0].
func receive(s *Server, name string, resumable bool, data []byte, end ...error) (*volumev1.ReceiveResponse, error) {
	half := len(data) / 2
	st := &receiveStream{ctx: context.Background(), msgs: []*volumev1.ReceiveChunk{
		{Header: &volumev1.ReceiveHeader{Volume: name, Resumable: resumable}, Data: data[:half]},
		{Data: data[half:]},
	}, end: io.EOF}
	if len(end) > 0 {
		st.end = end[0]
	}
	err := s.Receive(st)
	return st.resp, err
}

// sendStream collects what Server.Send sends.
type sendStream struct {
	grpc.ServerStream
	ctx      context.Context
	data     bytes.Buffer
	estimate uint64
}

func (s *sendStream) Context() context.Context { return s.ctx }

func (s *sendStream) Send(c *volumev1.SendChunk) error {
	if c.GetEstimatedBytes() > 0 {
		s.estimate = c.GetEstimatedBytes()
	}
	s.data.Write(c.GetData())
	return nil
}

// receiveStream feeds Server.Receive its messages, then end.
type receiveStream struct {
	grpc.ServerStream
	ctx  context.Context
	msgs []*volumev1.ReceiveChunk
	end  error
	resp *volumev1.ReceiveResponse
}

func (s *receiveStream) Context() context.Context { return s.ctx }

func (s *receiveStream) Recv() (*volumev1.ReceiveChunk, error) {
	if len(s.msgs) == 0 {
		return nil, s.end
	}
	c := s.msgs[0]
	s.msgs = s.msgs[1:]
	return c, nil
}

func (s *receiveStream) SendAndClose(r *volumev1.ReceiveResponse) error {
	s.resp = r
	return nil
}
