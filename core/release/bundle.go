package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ployz/ployz/core/tarsafe"
)

// FormatVersion is the manifest format this package writes. A reader
// accepts any format it knows the fields of; a later format only adds.
const FormatVersion = 1

// ManifestName is the bundle member holding the manifest; it comes first.
const ManifestName = "manifest.json"

// Binaries a bundle carries: ployzd and the plugins shipped with it.
var Binaries = []string{"ployzd", "ployz-dns", "ployz-ingress-caddy", "ployz-logstore", "ployz-metrics", "ployz-volume-zfs"}

// Manifest describes one bundle.
type Manifest struct {
	Format        int    `json:"format"`
	Version       string `json:"version"`
	ProtocolMajor int    `json:"protocol_major"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	Files         []File `json:"files"`
}

// File is one bundle member: a path like bin/ployzd or systemd/ployz.service.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size"`
}

// File returns the member at p.
func (m *Manifest) File(p string) (File, bool) {
	for _, f := range m.Files {
		if f.Path == p {
			return f, true
		}
	}
	return File{}, false
}

var versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$`)

// ValidVersion reports whether v can name a release directory.
func ValidVersion(v string) error {
	if !versionRE.MatchString(v) || strings.Contains(v, "..") {
		return fmt.Errorf("version %q: want 1-64 of [0-9A-Za-z._+-], starting with a letter or digit", v)
	}
	return nil
}

// Validate checks the manifest's own fields, naming the first bad one.
func (m *Manifest) Validate() error {
	if m.Format < 1 {
		return fmt.Errorf("manifest: format: %d is not a known format", m.Format)
	}
	if err := ValidVersion(m.Version); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if m.ProtocolMajor < 1 {
		return fmt.Errorf("manifest: protocol_major: %d, want >= 1", m.ProtocolMajor)
	}
	if m.OS == "" || m.Arch == "" {
		return errors.New("manifest: os and arch are required")
	}
	seen := map[string]bool{}
	for i, f := range m.Files {
		if err := validPath(f.Path); err != nil {
			return fmt.Errorf("manifest: files[%d].path: %w", i, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("manifest: files[%d].path: %s listed twice", i, f.Path)
		}
		seen[f.Path] = true
		if b, err := hex.DecodeString(f.SHA256); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("manifest: files[%d].sha256: not a sha256 hex digest", i)
		}
	}
	if _, ok := m.File("bin/ployzd"); !ok {
		return errors.New("manifest: files: bin/ployzd is missing")
	}
	return nil
}

func validPath(p string) error {
	if p == "" || p == ManifestName || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
		return fmt.Errorf("%q is not a clean relative path", p)
	}
	return nil
}

// Target is what a Machine can run: its OS, arch and protocol major.
type Target struct {
	OS, Arch      string
	ProtocolMajor int
}

// Check refuses a bundle the target cannot run, naming the field.
func (m *Manifest) Check(t Target) error {
	if m.OS != t.OS {
		return fmt.Errorf("bundle %s: os is %s, the Machine runs %s", m.Version, m.OS, t.OS)
	}
	if m.Arch != t.Arch {
		return fmt.Errorf("bundle %s: arch is %s, the Machine runs %s", m.Version, m.Arch, t.Arch)
	}
	if m.ProtocolMajor != t.ProtocolMajor {
		return fmt.Errorf("bundle %s: protocol_major is %d, the Machine speaks %d; an upgrade never crosses a protocol major (a new major line is installed fresh)", m.Version, m.ProtocolMajor, t.ProtocolMajor)
	}
	return nil
}

// Source is one file to put in a bundle.
type Source struct {
	Path string // bundle path, e.g. bin/ployzd
	From string // file on disk
	Mode uint32 // 0 takes the file's own permission bits
}

// Write builds a bundle from srcs into w. m's Files are filled in here.
func Write(w io.Writer, m Manifest, srcs []Source) (Manifest, error) {
	m.Format = FormatVersion
	m.Files = nil
	for _, s := range srcs {
		f, err := describe(s)
		if err != nil {
			return m, err
		}
		m.Files = append(m.Files, f)
	}
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	if err := m.Validate(); err != nil {
		return m, err
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	mj, _ := json.MarshalIndent(m, "", "  ")
	if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(mj)), Typeflag: tar.TypeReg}); err != nil {
		return m, err
	}
	if _, err := tw.Write(mj); err != nil {
		return m, err
	}
	for _, s := range srcs {
		f, _ := m.File(s.Path)
		if err := addFile(tw, s.From, f); err != nil {
			return m, err
		}
	}
	if err := tw.Close(); err != nil {
		return m, err
	}
	return m, gz.Close()
}

func describe(s Source) (File, error) {
	st, err := os.Stat(s.From)
	if err != nil {
		return File{}, fmt.Errorf("bundle %s: %w", s.Path, err)
	}
	d, err := FileDigest(s.From)
	if err != nil {
		return File{}, err
	}
	mode := s.Mode
	if mode == 0 {
		mode = uint32(st.Mode().Perm())
	}
	return File{Path: s.Path, SHA256: d, Mode: mode, Size: st.Size()}, nil
}

func addFile(tw *tar.Writer, from string, f File) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: int64(f.Mode), Size: f.Size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return fmt.Errorf("bundle %s: %w", f.Path, err)
	}
	return nil
}

// FileDigest is the hex sha256 of a file's content.
func FileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("digest %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ReadManifest reads only the manifest of the bundle in r (its first member).
func ReadManifest(r io.Reader) (*Manifest, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("bundle: not a tar.gz: %w", err)
	}
	tr := tar.NewReader(gz)
	return readManifest(tr)
}

// OpenManifest reads the manifest of the bundle file at p.
func OpenManifest(p string) (*Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadManifest(f)
}

func readManifest(tr *tar.Reader) (*Manifest, error) {
	h, err := tarsafe.Next(tr)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	if h.Name != ManifestName {
		return nil, fmt.Errorf("bundle: first member is %q, want %s", h.Name, ManifestName)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("bundle: %s: %w", ManifestName, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return &m, nil
}

// Extract unpacks the bundle in r into dir (which must not exist yet),
// after checking it against t. Every member must be listed in the manifest
// and match its digest; every listed file must be present. On any error
// dir is removed again, so a half-written release never exists.
func Extract(r io.Reader, dir string, t Target) (m *Manifest, err error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("bundle: not a tar.gz: %w", err)
	}
	tr := tar.NewReader(gz)
	if m, err = readManifest(tr); err != nil {
		return nil, err
	}
	if err := m.Check(t); err != nil {
		return nil, err
	}
	tmp := dir + ".partial"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := extractMembers(tr, tmp, m); err != nil {
		return nil, err
	}
	mj, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(tmp, ManifestName), mj, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("bundle: install %s: %w", dir, err)
	}
	return m, nil
}

func extractMembers(tr *tar.Reader, dir string, m *Manifest) error {
	got := map[string]bool{}
	for {
		h, err := tarsafe.Next(tr)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("bundle: %w", err)
		}
		f, ok := m.File(h.Name)
		if !ok || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("bundle: member %q is not listed in the manifest", h.Name)
		}
		if got[h.Name] {
			return fmt.Errorf("bundle: member %q appears twice", h.Name)
		}
		got[h.Name] = true
		if err := writeVerified(tr, filepath.Join(dir, filepath.FromSlash(f.Path)), f); err != nil {
			return err
		}
	}
	for _, f := range m.Files {
		if !got[f.Path] {
			return fmt.Errorf("bundle: %s is listed in the manifest but missing", f.Path)
		}
	}
	return nil
}

func writeVerified(r io.Reader, dst string, f File) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, fs.FileMode(f.Mode&0o777))
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bundle: %s: %w", f.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("bundle: %s: sha256 is %s, the manifest says %s", f.Path, got, f.SHA256)
	}
	return nil
}

// BundleName is the file name `make release` gives a bundle.
func BundleName(version, goos, arch string) string {
	return fmt.Sprintf("ployz-%s-%s-%s.tar.gz", version, goos, arch)
}
