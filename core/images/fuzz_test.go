package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// tarSeed is a small archive of name/content pairs, in order.
func tarSeed(tb testing.TB, kv ...string) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i+1 < len(kv); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: kv[i], Mode: 0o644, Size: int64(len(kv[i+1])), Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(kv[i+1])); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// entries reads an archive's members by name (the last of a name wins).
func entries(b []byte) (map[string]string, error) {
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out[h.Name] = string(body)
	}
}

func tarSeeds(f *testing.F) {
	f.Add(tarSeed(f, "aaa/layer.tar", "AAAA", "bbb/layer.tar", "BB", "manifest.json", `[{"Layers":["aaa/layer.tar","bbb/layer.tar"]}]`), "aaa/layer.tar")
	f.Add(tarSeed(f, "manifest.json", `[{"Layers":["x"]},{"Layers":["y"]}]`), "x")
	f.Add(tarSeed(f, "manifest.json", `{"Layers":7}`), "")
	f.Add([]byte("not a tar archive at all"), "")
	if b, err := os.ReadFile("../tarsafe/testdata/sparse.tar"); err == nil {
		f.Add(b, "")
	}
}

// TestFanTarRefusesSparse: a 2.5 KB upload whose entry reads as a TiB of
// zeros is refused before any target gets more than its header.
func TestFanTarRefusesSparse(t *testing.T) {
	b, err := os.ReadFile("../tarsafe/testdata/sparse.tar")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	k := &sink{id: "m2", skip: map[string]bool{}, tw: tar.NewWriter(&out)}
	if err := fanTar(bytes.NewReader(b), []*sink{k}); err == nil {
		t.Fatal("fanTar relayed a sparse entry")
	}
	if out.Len() > 0 {
		t.Fatalf("the target got %d bytes of it", out.Len())
	}
	s := &savedImage{path: "../tarsafe/testdata/sparse.tar"}
	if err := s.stream(io.Discard, map[string]bool{"other": true}); err == nil {
		t.Fatal("stream copied a sparse entry")
	}
}

// FuzzFanTar relays arbitrary bytes as the archive an operator uploads to
// image_relay, to a target that takes everything and one that skips an
// entry. Properties: no panic; when the archive reads to its end and a
// target's copy was written, that copy holds exactly the archive's
// entries less the skipped one, with the same content.
func FuzzFanTar(f *testing.F) {
	tarSeeds(f)
	f.Fuzz(func(t *testing.T, archive []byte, skipped string) {
		var all, some bytes.Buffer
		sinks := []*sink{
			{id: "all", skip: map[string]bool{}, tw: tar.NewWriter(&all)},
			{id: "some", skip: map[string]bool{skipped: true}, tw: tar.NewWriter(&some)},
		}
		if err := fanTar(bytes.NewReader(archive), sinks); err != nil {
			return
		}
		want, err := entries(archive)
		if err != nil {
			t.Fatalf("fanTar read the archive to its end, a second reader fails: %v", err)
		}
		checkCopy(t, sinks[0], all.Bytes(), want)
		delete(want, skipped)
		checkCopy(t, sinks[1], some.Bytes(), want)
	})
}

func checkCopy(t *testing.T, k *sink, b []byte, want map[string]string) {
	t.Helper()
	if k.err != nil {
		return // the tar writer refused a header: the target reports it
	}
	got, err := entries(b)
	if err != nil {
		t.Fatalf("%s: the copy does not read back: %v", k.id, err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("%s: copy holds %q, want %q", k.id, got, want)
	}
}

// FuzzSavedImage reads arbitrary bytes as a `docker save` archive: its
// manifest's layers, then the archive streamed without a skipped entry.
// Properties: no panic; a stream that completes holds the archive's
// entries less the skipped one.
func FuzzSavedImage(f *testing.F) {
	tarSeeds(f)
	f.Fuzz(func(t *testing.T, archive []byte, skipped string) {
		p := filepath.Join(t.TempDir(), "image.tar")
		if err := os.WriteFile(p, archive, 0o600); err != nil {
			t.Fatal(err)
		}
		layers, err := manifestLayers(p)
		if err != nil && layers != nil {
			t.Fatalf("manifestLayers failed (%v) yet gave layers %q", err, layers)
		}
		var out bytes.Buffer
		s := &savedImage{path: p, size: int64(len(archive))}
		if err := s.stream(&out, map[string]bool{skipped: true}); err != nil {
			return
		}
		want, err := entries(archive)
		if err != nil {
			t.Fatalf("stream read the archive to its end, a second reader fails: %v", err)
		}
		delete(want, skipped)
		got, err := entries(out.Bytes())
		if err != nil {
			t.Fatalf("streamed copy does not read back: %v", err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("streamed copy holds %q, want %q", got, want)
		}
	})
}
