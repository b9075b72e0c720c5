package release

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
)

// A release source is a directory tree served as static files:
//
//	install.sh                    the install script of the newest release
//	v0/stable, v0/edge            channel pointers: a version, one line
//	v0/<version>/release.json     the index: every artifact's name, kind,
//	                              os/arch, size and sha256
//	v0/<version>/release.json.sig the detached Ed25519 signature of the index
//	v0/<version>/<artifacts>      bundles, CLIs, .debs, install.sh, SHA256SUMS
//
// Only the index is signed; every artifact is trusted through its digest
// in the signed index, and a bundle's members through the bundle's own
// manifest.
const (
	IndexName = "release.json"
	SigSuffix = ".sig"
	SumsName  = "SHA256SUMS"
	// ScriptName is the POSIX install script for the CLI.
	ScriptName = "install.sh"
)

// Artifact kinds in an index.
const (
	KindBundle = "bundle"
	KindCLI    = "cli"
	KindDeb    = "deb"
	KindScript = "script"
)

// IndexFormat is the index format this package writes; readers ignore
// fields they do not know.
const IndexFormat = 1

// Index is a release's signed list of artifacts.
type Index struct {
	Format        int        `json:"format"`
	Version       string     `json:"version"`
	Line          string     `json:"line"` // v0, v1, ...: the major release line
	ProtocolMajor int        `json:"protocol_major"`
	Artifacts     []Artifact `json:"artifacts"`
}

// Artifact is one file of a release beside its index.
type Artifact struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	OS     string `json:"os,omitempty"`
	Arch   string `json:"arch,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var channelRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// ValidChannel refuses a channel name that cannot be a file name.
func ValidChannel(c string) error {
	if !channelRE.MatchString(c) {
		return fmt.Errorf("channel %q: want 1-32 of [a-z0-9-], starting with a letter (stable, edge)", c)
	}
	return nil
}

// Line is the release line of version v: "v" and its major number
// (0.4.2 and v0.4.2 are v0). A version without a dotted leading number,
// such as a development build's commit hash (174911b), is v0.
func Line(v string) string {
	m := lineRE.FindStringSubmatch(v)
	if m == nil {
		return "v0"
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return "v0"
	}
	return "v" + strconv.Itoa(n)
}

var lineRE = regexp.MustCompile(`^v?([0-9]{1,9})\.`)

// ChannelPath is the pointer file of channel on line.
func ChannelPath(line, channel string) string { return path.Join(line, channel) }

// VersionDir is where a version's files sit in the source.
func VersionDir(line, version string) string { return path.Join(line, version) }

// CLIName is the file name of the CLI for goos/arch.
func CLIName(version, goos, arch string) string {
	return fmt.Sprintf("ployz-cli-%s-%s-%s", version, goos, arch)
}

// ParseIndex decodes and checks an index; where names it in errors.
func ParseIndex(where string, b []byte) (*Index, error) {
	var ix Index
	if err := json.Unmarshal(b, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if ix.Format < 1 {
		return nil, fmt.Errorf("%s: format: %d is not a known format", where, ix.Format)
	}
	if err := ValidVersion(ix.Version); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if ix.Line != Line(ix.Version) {
		return nil, fmt.Errorf("%s: line is %q, version %s is on %s", where, ix.Line, ix.Version, Line(ix.Version))
	}
	for i, a := range ix.Artifacts {
		if a.Name == "" || path.Base(a.Name) != a.Name || a.Name == "." || a.Name == ".." {
			return nil, fmt.Errorf("%s: artifacts[%d].name: %q is not a plain file name", where, i, a.Name)
		}
		if len(a.SHA256) != 64 {
			return nil, fmt.Errorf("%s: artifacts[%d].sha256: not a sha256 hex digest", where, i)
		}
	}
	return &ix, nil
}

// Find returns the artifact of kind for goos/arch ("" matches any).
func (ix *Index) Find(kind, goos, arch string) (Artifact, bool) {
	for _, a := range ix.Artifacts {
		if a.Kind == kind && (goos == "" || a.OS == goos) && (arch == "" || a.Arch == arch) {
			return a, true
		}
	}
	return Artifact{}, false
}

// CheckLine refuses a release of another line than want: a channel of a
// line never offers another line's release (DESIGN's Stable promise).
// who names what is on want.
func (ix *Index) CheckLine(who, want string) error {
	if ix.Line != want {
		return fmt.Errorf("release %s is on line %s, and %s is on %s: a new release line is installed fresh, never upgraded into", ix.Version, ix.Line, who, want)
	}
	return nil
}
