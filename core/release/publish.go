package release

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Publish finishes a release in the source directory root: the files of
// ix.Artifacts (Name, Kind, OS, Arch) already sit in
// root/<line>/<version>/; Publish fills in their sizes and digests,
// writes SHA256SUMS, the index and its signature by key, a detached
// signature <bundle>.sig beside each bundle (so a bundle copied out of
// the source stays verifiable), then points each channel at the version. A channel is written last, so a reader
// never follows a pointer to a release without its signature.
func Publish(root string, ix Index, key ed25519.PrivateKey, channels []string) (*Index, error) {
	ix.Format, ix.Line = IndexFormat, Line(ix.Version)
	if err := ValidVersion(ix.Version); err != nil {
		return nil, err
	}
	for _, c := range channels {
		if err := ValidChannel(c); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(root, filepath.FromSlash(VersionDir(ix.Line, ix.Version)))
	var sums strings.Builder
	for i, a := range ix.Artifacts {
		p := filepath.Join(dir, a.Name)
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		if ix.Artifacts[i].SHA256, err = FileDigest(p); err != nil {
			return nil, err
		}
		ix.Artifacts[i].Size = st.Size()
		fmt.Fprintf(&sums, "%s  %s\n", ix.Artifacts[i].SHA256, a.Name)
		if a.Kind == KindBundle {
			if err := os.WriteFile(p+SigSuffix, Sign(BundleStatement(ix.Artifacts[i].SHA256), key), 0o644); err != nil {
				return nil, err
			}
		}
	}
	b, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	if _, err := ParseIndex("publish", b); err != nil {
		return nil, err
	}
	writes := []struct {
		name string
		data []byte
	}{{SumsName, []byte(sums.String())}, {IndexName, b}, {IndexName + SigSuffix, Sign(b, key)}}
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(dir, w.name), w.data, 0o644); err != nil {
			return nil, err
		}
	}
	for _, c := range channels {
		if err := writeAtomic(filepath.Join(root, filepath.FromSlash(ChannelPath(ix.Line, c))), []byte(ix.Version+"\n")); err != nil {
			return nil, err
		}
	}
	return &ix, nil
}

// writeAtomic replaces p's content in one rename, so a server never
// serves half a pointer.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
