package volume_test

import (
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/contract.golden")

// TestContractGolden pins ployz.plugin.volume.v1: every rpc with its
// streaming, every message field with its number and type. The contract
// only grows: a diff that changes or drops a line breaks plugins built on
// the old one. Run with -update after an additive change and review.
func TestContractGolden(t *testing.T) {
	fd := volumev1.File_ployz_plugin_volume_v1_volume_proto
	var lines []string
	svcs := fd.Services()
	for i := 0; i < svcs.Len(); i++ {
		ms := svcs.Get(i).Methods()
		for j := 0; j < ms.Len(); j++ {
			m := ms.Get(j)
			lines = append(lines, fmt.Sprintf("rpc %s.%s(%s%s) returns (%s%s)", svcs.Get(i).Name(), m.Name(),
				stream(m.IsStreamingClient()), m.Input().Name(), stream(m.IsStreamingServer()), m.Output().Name()))
		}
	}
	msgs := fd.Messages()
	for i := 0; i < msgs.Len(); i++ {
		fs := msgs.Get(i).Fields()
		for j := 0; j < fs.Len(); j++ {
			f := fs.Get(j)
			lines = append(lines, fmt.Sprintf("message %s field %d %s %s%s", msgs.Get(i).Name(), f.Number(), f.Name(), card(f), kind(f)))
		}
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	const path = "testdata/contract.golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, l := range strings.Split(string(want), "\n") {
		old[l] = l != ""
	}
	now := map[string]bool{}
	for _, l := range lines {
		now[l] = true
	}
	for l, ok := range old {
		if ok && !now[l] {
			t.Errorf("the contract lost or changed %q (it may only grow)", l)
		}
	}
	if got != string(want) {
		t.Errorf("contract differs from %s; if the change is additive, rerun with -update", path)
	}
}

func stream(b bool) string {
	if b {
		return "stream "
	}
	return ""
}

func card(f protoreflect.FieldDescriptor) string {
	switch {
	case f.IsMap():
		return "map "
	case f.IsList():
		return "repeated "
	}
	return ""
}

func kind(f protoreflect.FieldDescriptor) string {
	if f.IsMap() {
		return fmt.Sprintf("<%s,%s>", f.MapKey().Kind(), f.MapValue().Kind())
	}
	if m := f.Message(); m != nil {
		return string(m.Name())
	}
	return f.Kind().String()
}

// TestWireFixtures decodes bytes an earlier plugin wrote: a VolumeInfo of
// the first contract (fields 1-5 only) and a SendChunk, so a reader built
// on today's contract still understands them.
func TestWireFixtures(t *testing.T) {
	// VolumeInfo{name:"db", mountpoint:"/var/lib/ployz/volumes/db",
	// size_bytes:1<<30, used_bytes:4096, snapshots:["s1"]}
	v1, _ := hex.DecodeString("0a02646212192f7661722f6c69622f706c6f797a2f766f6c756d65732f64621880808080042080202a027331")
	var vi volumev1.VolumeInfo
	if err := proto.Unmarshal(v1, &vi); err != nil {
		t.Fatal(err)
	}
	if vi.GetName() != "db" || vi.GetMountpoint() != "/var/lib/ployz/volumes/db" || vi.GetSizeBytes() != 1<<30 ||
		vi.GetUsedBytes() != 4096 || len(vi.GetSnapshots()) != 1 || vi.GetSnapshots()[0] != "s1" || vi.GetResumeToken() != "" {
		t.Fatalf("decoded %v", &vi)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&volumev1.VolumeInfo{Name: "db", Mountpoint: "/var/lib/ployz/volumes/db",
		SizeBytes: 1 << 30, UsedBytes: 4096, Snapshots: []string{"s1"}})
	if err != nil || hex.EncodeToString(b) != hex.EncodeToString(v1) {
		t.Fatalf("encoding of the first contract's fields changed: %x, %v", b, err)
	}
	// A resumable receive's header, then data.
	b, _ = proto.Marshal(&volumev1.ReceiveChunk{Header: &volumev1.ReceiveHeader{Volume: "db", Resumable: true}, Data: []byte{1, 2}})
	if got := hex.EncodeToString(b); got != "0a060a026462100112020102" {
		t.Fatalf("ReceiveChunk encodes as %s", got)
	}
	// The estimate (additive): a chunk of data alone, as a plugin from
	// before it sends, reads as no estimate.
	var sc volumev1.SendChunk
	if err := proto.Unmarshal([]byte{0x0a, 0x02, 1, 2}, &sc); err != nil || sc.GetEstimatedBytes() != 0 || len(sc.GetData()) != 2 {
		t.Fatalf("an old SendChunk: %v, %v", &sc, err)
	}
	b, _ = proto.Marshal(&volumev1.SendChunk{EstimatedBytes: 300})
	if got := hex.EncodeToString(b); got != "10ac02" {
		t.Fatalf("SendChunk{estimated_bytes} encodes as %s", got)
	}
	// Bookmarks (additive, field 11): a listing carrying one, and the
	// prune's request. The first contract's VolumeInfo above reads as
	// holding none.
	if len(vi.GetBookmarks()) != 0 {
		t.Fatalf("an old VolumeInfo has bookmarks %v", vi.GetBookmarks())
	}
	bm, _ := hex.DecodeString("0a0264625a0b0a0572756e2d311a023432")
	var vb volumev1.VolumeInfo
	if err := proto.Unmarshal(bm, &vb); err != nil || len(vb.GetBookmarks()) != 1 || vb.GetBookmarks()[0].GetName() != "run-1" || vb.GetBookmarks()[0].GetGuid() != "42" {
		t.Fatalf("VolumeInfo{bookmarks}: %v, %v", &vb, err)
	}
	b, _ = proto.Marshal(&volumev1.DestroySnapshotRequest{Volume: "db", Snapshot: "run-1", Bookmark: true})
	if got := hex.EncodeToString(b); got != "0a026462120572756e2d311801" {
		t.Fatalf("DestroySnapshotRequest encodes as %s", got)
	}
}
