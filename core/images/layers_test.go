package images

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/image"

	"github.com/ployz/ployz/core/rpc"
)

// TestLayerSkippingLoads: an archive without the layers a Docker already
// holds loads there, and moves only the new layer's bytes.
func TestLayerSkippingLoads(t *testing.T) {
	cli := dockerOrSkip(t)
	ctx := context.Background()
	repo := "ployz-layertest"
	t.Cleanup(func() {
		for _, tag := range []string{repo + "-base:latest", repo + "-app:latest"} {
			cli.ImageRemove(ctx, tag, image.RemoveOptions{Force: true}) // best effort
		}
	})
	dir := t.TempDir()
	big := make([]byte, 4<<20)
	rand.Read(big) // never fails
	os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644)
	os.WriteFile(filepath.Join(dir, "small.txt"), []byte("v1"), 0o644)
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY big.bin /\n"), 0o644)
	bb, err := Build(ctx, BuildRequest{Repo: repo + "-base", Context: dir})
	base := bb.Tag
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+base+"\nCOPY small.txt /\n"), 0o644)
	ab, err := Build(ctx, BuildRequest{Repo: repo + "-app", Context: dir})
	app := ab.Tag
	if err != nil {
		t.Fatal(err)
	}
	baseInfo, _ := cli.ImageInspect(ctx, base)
	appInfo, _ := cli.ImageInspect(ctx, app)
	saved, err := saveImage(ctx, cli, app, appInfo.RootFS.Layers)
	if err != nil {
		t.Fatal(err)
	}
	defer saved.remove()
	held := heldChains(rpc.ImageList{Images: []rpc.ImageInfo{{ID: baseInfo.ID, Layers: baseInfo.RootFS.Layers}}})
	skip := saved.skip(held)
	if len(skip) != 1 {
		t.Fatalf("skip %v, want the base layer only (layers %v)", skip, saved.layers)
	}
	var slim bytes.Buffer
	if err := saved.stream(&slim, skip); err != nil {
		t.Fatal(err)
	}
	if slim.Len() > 1<<20 || saved.size < 4<<20 {
		t.Fatalf("slim archive %d bytes of %d: the held 4 MiB layer was sent", slim.Len(), saved.size)
	}
	if _, err := cli.ImageRemove(ctx, app, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	cli.ImageRemove(ctx, repo+"-app:latest", image.RemoveOptions{Force: true})
	resp, err := cli.ImageLoad(ctx, &slim)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	resp.Body.Close()
	if strings.Contains(out.String(), "error") {
		t.Fatalf("load: %s", out.String())
	}
	if got, err := cli.ImageInspect(ctx, app); err != nil || got.ID != appInfo.ID {
		t.Fatalf("after the slim load: %v %v", got.ID, err)
	}
}
