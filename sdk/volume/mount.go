package volume

import (
	"path/filepath"
	"strings"
)

// MountedVolume names the Provisioned Volume a host path lies in ("" for
// MountRoot itself, which holds all of them); ok is false outside
// MountRoot. ployzd's admission and the deploy planner's volume locality
// both read a bind mount's source with it, so they agree on which
// Service needs which Writer.
func MountedVolume(src string) (name string, ok bool) {
	if !filepath.IsAbs(src) {
		return "", false
	}
	rel, err := filepath.Rel(MountRoot, filepath.Clean(src))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	if rel == "." {
		return "", true
	}
	name, _, _ = strings.Cut(rel, "/")
	return name, true
}
