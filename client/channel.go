package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/crypto/ssh"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/internal/version"
)

// EnvReleaseSource and EnvChannel name a release source and channel when
// neither a flag nor the context does (install.sh's users, CI).
const (
	EnvReleaseSource = "PLOYZ_RELEASE_SOURCE"
	EnvChannel       = "PLOYZ_CHANNEL"
	// DefaultChannel is the channel used when none is named.
	DefaultChannel = "stable"
)

// ReleaseChannel is where releases come from (docs/releases.md): a
// release source (URL or directory) and a channel on this CLI's line.
type ReleaseChannel struct {
	Source  string `json:"source"`
	Channel string `json:"channel"`
}

// PickChannel is the channel a command uses: the flags, else the saved
// setting, else $PLOYZ_RELEASE_SOURCE / $PLOYZ_CHANNEL. ok is false when
// no source is named anywhere (the caller then installs from a bundle).
func PickChannel(flags, saved operator.ReleaseSetting) (rc ReleaseChannel, ok bool) {
	rc.Source = first(flags.Source, saved.Source, os.Getenv(EnvReleaseSource))
	rc.Channel = first(flags.Channel, saved.Channel, os.Getenv(EnvChannel), DefaultChannel)
	return rc, rc.Source != ""
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// SavedChannel is PickChannel with the Session's context's setting.
func (s *Session) SavedChannel(flags operator.ReleaseSetting) (ReleaseChannel, bool, error) {
	saved, err := s.st.ReleaseSetting(s.name)
	if err != nil {
		return ReleaseChannel{}, false, err
	}
	rc, ok := PickChannel(flags, saved)
	return rc, ok, nil
}

// Latest resolves the channel on this CLI's release line and verifies
// that release's signed index with the keys this build trusts.
func (rc ReleaseChannel) Latest(ctx context.Context) (*release.Release, error) {
	o, err := release.OpenOrigin(rc.Source)
	if err != nil {
		return nil, fmt.Errorf("--release-source: %w", err)
	}
	keys, err := release.TrustedKeys()
	if err != nil {
		return nil, err
	}
	line := release.Line(version.Version)
	v, err := o.Resolve(ctx, line, rc.Channel)
	if err != nil {
		return nil, fmt.Errorf("--release-source %s: %w", rc.Source, err)
	}
	r, err := o.Release(ctx, line, v, keys)
	if err != nil {
		return nil, err
	}
	return r, r.Index.CheckLine("this CLI ("+version.Version+")", line)
}

// FetchBundle downloads and verifies r's bundle for linux/arch into dir.
func FetchBundle(ctx context.Context, r *release.Release, arch, dir string) (string, *release.Manifest, error) {
	a, ok := r.Index.Find(release.KindBundle, "linux", arch)
	if !ok {
		return "", nil, fmt.Errorf("release %s has no bundle for linux/%s", r.Index.Version, arch)
	}
	p := filepath.Join(dir, a.Name)
	if err := r.Download(ctx, a, p, 0o600); err != nil {
		return "", nil, err
	}
	m, err := OpenBundle(p)
	if err != nil {
		return "", nil, err
	}
	if m.Version != r.Index.Version || m.Arch != arch {
		return "", nil, fmt.Errorf("%s: the bundle says %s linux/%s, the signed index %s linux/%s", a.Name, m.Version, m.Arch, r.Index.Version, arch)
	}
	return p, m, nil
}

// ChannelInstallDir is InstallDir from a channel: the release's bundle
// for the server's platform, verified and unpacked into a temporary
// directory, with the release's linux CLI of that arch beside ployzd.
func ChannelInstallDir(ctx context.Context, rc ReleaseChannel, plat release.Platform, progress func(string, ...any)) (bin string, cleanup func(), err error) {
	none := func() {}
	r, err := rc.Latest(ctx)
	if err != nil {
		return "", none, err
	}
	tmp, err := os.MkdirTemp("", "ployz-install-")
	if err != nil {
		return "", none, err
	}
	cleanup = func() { os.RemoveAll(tmp) }
	fail := func(err error) (string, func(), error) { cleanup(); return "", none, err }
	progress("fetching Ployz %s for %s/%s (%s) from %s, signed by key %s", r.Index.Version, plat.OS, plat.Arch, plat.Distro, rc.Source, r.KeyID)
	p, m, err := FetchBundle(ctx, r, plat.Arch, tmp)
	if err != nil {
		return fail(err)
	}
	f, err := os.Open(p)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if _, err := release.Extract(f, filepath.Join(tmp, "r"), release.Target{OS: plat.OS, Arch: plat.Arch, ProtocolMajor: m.ProtocolMajor}); err != nil {
		return fail(fmt.Errorf("install from %s: %w", p, err))
	}
	bin = filepath.Join(tmp, "r", "bin")
	if a, ok := r.Index.Find(release.KindCLI, "linux", plat.Arch); ok {
		if err := r.Download(ctx, a, filepath.Join(bin, "ployz"), 0o755); err != nil {
			return fail(err)
		}
	}
	return bin, cleanup, nil
}

// DetectPlatform asks the server behind c what it runs (uname, os-release)
// and refuses one no release is built for. It writes nothing there.
func DetectPlatform(c *ssh.Client) (release.Platform, error) {
	s, err := c.NewSession()
	if err != nil {
		return release.Platform{}, err
	}
	defer s.Close()
	out, err := s.Output(release.DetectCommand)
	if err != nil {
		return release.Platform{}, fmt.Errorf("detect the server's platform: %w", err)
	}
	return release.ParsePlatform(string(out))
}

// SelfUpdate replaces the CLI at exe with the channel's CLI for this
// computer, verified against the signed index. It returns the version
// installed, or ErrUpToDate.
func SelfUpdate(ctx context.Context, rc ReleaseChannel, exe string) (string, error) {
	r, err := rc.Latest(ctx)
	if err != nil {
		return "", err
	}
	if r.Index.Version == version.Version {
		return r.Index.Version, ErrUpToDate
	}
	a, ok := r.Index.Find(release.KindCLI, runtime.GOOS, runtime.GOARCH)
	if !ok {
		return "", fmt.Errorf("release %s has no CLI for %s/%s", r.Index.Version, runtime.GOOS, runtime.GOARCH)
	}
	// Beside exe, so the rename replaces it in one step on the same
	// filesystem; a refused download leaves exe as it was.
	tmp := exe + ".new"
	if err := r.Download(ctx, a, tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, exe); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("self-update: replace %s: %w", exe, err)
	}
	return r.Index.Version, nil
}

// ErrUpToDate says the channel offers the version already running.
var ErrUpToDate = errors.New("already the channel's version")
