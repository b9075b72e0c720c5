package release

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Origin is a release source: an http(s) URL or a local directory
// (docs/releases.md). Nothing read from it is trusted until the index is
// verified against the build's keys; every artifact is then checked
// against the index.
type Origin struct {
	base string // URL without trailing slash, or a directory
	http bool
	// Client fetches over HTTP; a timeout per request bounds a stuck server.
	Client *http.Client
}

// maxIndex bounds the small files (pointer, index, signature).
const maxIndex = 1 << 20

// ErrNotFound is wrapped when the source has no such file.
var ErrNotFound = errors.New("not found")

// OpenOrigin parses a --release-source: http://, https://, file:// or a
// path.
func OpenOrigin(s string) (*Origin, error) {
	if s == "" {
		return nil, errors.New("release source: empty; pass --release-source URL|PATH")
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("release source %q: not a URL with a host", s)
		}
		return &Origin{base: strings.TrimRight(s, "/"), http: true, Client: &http.Client{Timeout: 10 * time.Minute}}, nil
	}
	if strings.Contains(s, "://") && !strings.HasPrefix(s, "file://") {
		return nil, fmt.Errorf("release source %q: want http://, https://, file:// or a directory", s)
	}
	dir := strings.TrimPrefix(s, "file://")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("release source %q: not a directory", s)
	}
	return &Origin{base: dir}, nil
}

// String is the source as the operator named it.
func (s *Origin) String() string { return s.base }

// Where names rel in the source, for errors.
func (s *Origin) Where(rel string) string {
	if s.http {
		return s.base + "/" + rel
	}
	return filepath.Join(s.base, filepath.FromSlash(rel))
}

// open reads rel from the source.
func (s *Origin) open(ctx context.Context, rel string) (io.ReadCloser, error) {
	if !s.http {
		f, err := os.Open(s.Where(rel))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", s.Where(rel), ErrNotFound)
		}
		return f, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Where(rel), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", s.Where(rel), ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: HTTP %s", s.Where(rel), resp.Status)
	}
	return resp.Body, nil
}

// get reads a small file whole.
func (s *Origin) get(ctx context.Context, rel string) ([]byte, error) {
	r, err := s.open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxIndex+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Where(rel), err)
	}
	if len(b) > maxIndex {
		return nil, fmt.Errorf("%s: larger than %d bytes", s.Where(rel), maxIndex)
	}
	return b, nil
}

// Resolve reads the version channel points to on line.
func (s *Origin) Resolve(ctx context.Context, line, channel string) (string, error) {
	if err := ValidChannel(channel); err != nil {
		return "", err
	}
	b, err := s.get(ctx, ChannelPath(line, channel))
	if err != nil {
		return "", fmt.Errorf("channel %s/%s: %w", line, channel, err)
	}
	v := strings.TrimSpace(string(b))
	if err := ValidVersion(v); err != nil {
		return "", fmt.Errorf("channel %s: %w", s.Where(ChannelPath(line, channel)), err)
	}
	return v, nil
}

// Release is a version's index, verified.
type Release struct {
	Index *Index
	// KeyID is the trusted key whose signature was verified.
	KeyID string
	src   *Origin
	dir   string
	proof rpc.BundleProof
}

// Release fetches version's index and its signature and verifies it
// against keys; an index that names another version or line is refused.
func (s *Origin) Release(ctx context.Context, line, version string, keys []ed25519.PublicKey) (*Release, error) {
	if err := ValidVersion(version); err != nil {
		return nil, err
	}
	dir := VersionDir(line, version)
	rel := path.Join(dir, IndexName)
	index, err := s.get(ctx, rel)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", version, err)
	}
	sig, err := s.get(ctx, rel+SigSuffix)
	if errors.Is(err, ErrNotFound) {
		sig, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	keyID, err := VerifyKey(s.Where(rel), index, sig, keys)
	if err != nil {
		return nil, err
	}
	ix, err := ParseIndex(s.Where(rel), index)
	if err != nil {
		return nil, err
	}
	if ix.Version != version || ix.Line != line {
		return nil, fmt.Errorf("%s: the signed index is of %s (line %s), not %s (line %s): a release's files were moved or replaced", s.Where(rel), ix.Version, ix.Line, version, line)
	}
	return &Release{Index: ix, KeyID: keyID, src: s, dir: dir, proof: rpc.BundleProof{Index: index, IndexSignature: sig}}, nil
}

// Proof vouches for this release's bundles to a Machine: the signed
// index listing them, which every release has (a release published
// before bundles got a .sig of their own too).
func (r *Release) Proof() *rpc.BundleProof {
	p := r.proof
	return &p
}

// Download writes artifact a to dst (created, 0 perm bits of mode) and
// checks its size and sha256 against the signed index; on a mismatch dst
// is removed and the error names the file and the key.
func (r *Release) Download(ctx context.Context, a Artifact, dst string, mode os.FileMode) error {
	rel := path.Join(r.dir, a.Name)
	in, err := r.src.open(ctx, rel)
	if err != nil {
		return fmt.Errorf("release %s: %w", r.Index.Version, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(in, a.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != a.Size {
		err = fmt.Errorf("%d bytes, the index signed by key %s says %d", n, r.KeyID, a.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); err == nil && got != a.SHA256 {
		err = fmt.Errorf("sha256 is %s, the index signed by key %s says %s (tampered or corrupted)", got, r.KeyID, a.SHA256)
	}
	if err != nil {
		os.Remove(dst)
		return fmt.Errorf("%s: %w", r.src.Where(rel), err)
	}
	return nil
}
