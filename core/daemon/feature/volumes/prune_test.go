package volumes

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

// prunePlugin is a volume plugin answering DestroySnapshot only.
type prunePlugin struct {
	volumev1.VolumeClient
	vi      *volumev1.VolumeInfo
	asked   []*volumev1.DestroySnapshotRequest
	failsOn string
}

func (p *prunePlugin) DestroySnapshot(_ context.Context, req *volumev1.DestroySnapshotRequest, _ ...grpc.CallOption) (*volumev1.DestroySnapshotResponse, error) {
	p.asked = append(p.asked, req)
	if req.GetSnapshot() == p.failsOn {
		return nil, errors.New("zfs destroy: dataset is busy")
	}
	var kept []*volumev1.SnapshotInfo
	for _, s := range p.vi.GetSnapshotDetails() {
		if s.GetName() != req.GetSnapshot() {
			kept = append(kept, s)
		}
	}
	p.vi = &volumev1.VolumeInfo{Name: p.vi.GetName(), SnapshotDetails: kept,
		Bookmarks: append(p.vi.GetBookmarks(), &volumev1.BookmarkInfo{Name: req.GetSnapshot()})}
	return &volumev1.DestroySnapshotResponse{Volume: p.vi}, nil
}

func snapNames(vi *volumev1.VolumeInfo) []string {
	var out []string
	for _, s := range vi.GetSnapshotDetails() {
		out = append(out, s.GetName())
	}
	return out
}

// TestPruneRuns: the oldest run snapshots go, each bookmarked first; the
// newest two and an operator's own snapshots stay.
func TestPruneRuns(t *testing.T) {
	vi := &volumev1.VolumeInfo{Name: "db"}
	for _, n := range []string{"run-1", "before-upgrade", "run-2", "run-3", "run-4-cut", "run-5"} {
		vi.SnapshotDetails = append(vi.SnapshotDetails, &volumev1.SnapshotInfo{Name: n})
	}
	p := &prunePlugin{vi: vi}
	got := pruneRuns(context.Background(), hclog.NewNullLogger(), p, vi)
	if want := []string{"before-upgrade", "run-4-cut", "run-5"}; !slices.Equal(snapNames(got), want) {
		t.Fatalf("kept %v, want %v", snapNames(got), want)
	}
	for _, req := range p.asked {
		if !req.GetBookmark() || req.GetVolume() != "db" {
			t.Errorf("asked %v: every prune bookmarks first", req)
		}
	}
	if len(got.GetBookmarks()) != 3 {
		t.Errorf("bookmarks %v", got.GetBookmarks())
	}
	// Nothing to prune: the plugin is not asked.
	p2 := &prunePlugin{vi: got}
	if pruneRuns(context.Background(), hclog.NewNullLogger(), p2, got); len(p2.asked) != 0 {
		t.Errorf("asked %v with two run snapshots left", p2.asked)
	}
	// A failure stops the prune and answers the volume as last seen.
	p3 := &prunePlugin{vi: vi, failsOn: "run-2"}
	got = pruneRuns(context.Background(), hclog.NewNullLogger(), p3, vi)
	if want := []string{"before-upgrade", "run-2", "run-3", "run-4-cut", "run-5"}; !slices.Equal(snapNames(got), want) {
		t.Fatalf("after a failed prune kept %v, want %v", snapNames(got), want)
	}
}
