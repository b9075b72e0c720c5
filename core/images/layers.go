package images

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/tarsafe"
)

// A Machine that holds some of an image's layers receives an archive
// without them: Docker's load skips reading a layer whose chain (the layer
// and every layer below it) it already has, as a registry's blob check
// lets a push skip blobs. Chain ids are computed from the layer diff ids
// the Machine reports (list_images with layers).

// chainIDs returns the chain id of every prefix of diffs.
func chainIDs(diffs []string) []string {
	out := make([]string, len(diffs))
	for i, d := range diffs {
		if i == 0 {
			out[i] = d
			continue
		}
		s := sha256.Sum256([]byte(out[i-1] + " " + d))
		out[i] = "sha256:" + hex.EncodeToString(s[:])
	}
	return out
}

// heldChains is every layer chain a Machine's images hold.
func heldChains(list rpc.ImageList) map[string]bool {
	held := map[string]bool{}
	for _, im := range list.Images {
		for _, c := range chainIDs(im.Layers) {
			held[c] = true
		}
	}
	return held
}

// savedImage is one `docker save` archive kept in a temporary file, so
// every Machine's upload reads it rather than saving once per Machine.
type savedImage struct {
	path string
	size int64
	// layers are the archive paths of the image's layers, in the order of
	// its diff ids.
	layers []string
	diffs  []string
}

func saveImage(ctx context.Context, docker *client.Client, image string, diffs []string) (*savedImage, error) {
	rd, err := docker.ImageSave(ctx, []string{image})
	if err != nil {
		return nil, fmt.Errorf("docker save %s: %w", image, err)
	}
	defer rd.Close()
	f, err := os.CreateTemp("", "ployz-image-*.tar")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := &savedImage{path: f.Name(), diffs: diffs}
	if s.size, err = io.Copy(f, rd); err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("docker save %s: %w", image, err)
	}
	if s.layers, err = manifestLayers(f.Name()); err != nil || len(s.layers) != len(diffs) {
		s.layers = nil // unknown layout: always send everything
	}
	return s, nil
}

func (s *savedImage) remove() { os.Remove(s.path) } // a temporary file

// manifestLayers reads the layer paths of the archive's only image.
func manifestLayers(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tarsafe.Next(tr)
		if err != nil {
			return nil, err
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ Layers []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return nil, err
		}
		if len(m) != 1 {
			return nil, errors.New("manifest.json: want one image")
		}
		return m[0].Layers, nil
	}
}

// skip lists the archive paths a Machine holding held may go without:
// layers whose chain it holds, unless a layer it lacks shares the path.
func (s *savedImage) skip(held map[string]bool) map[string]bool {
	if s.layers == nil {
		return nil
	}
	out, need := map[string]bool{}, map[string]bool{}
	for i, c := range chainIDs(s.diffs) {
		if held[c] {
			out[s.layers[i]] = true
		} else {
			need[s.layers[i]] = true
		}
	}
	for p := range need {
		delete(out, p)
	}
	return out
}

// stream writes the archive without the skipped paths to w.
func (s *savedImage) stream(w io.Writer, skip map[string]bool) error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if len(skip) == 0 {
		_, err = io.Copy(w, f)
		return err
	}
	tr, tw := tar.NewReader(f), tar.NewWriter(w)
	for {
		h, err := tarsafe.Next(tr)
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		if skip[h.Name] {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}
