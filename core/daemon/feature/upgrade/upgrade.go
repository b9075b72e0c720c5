package upgrade

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/pluginhost"
	"github.com/ployz/ployz/core/release"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/version"
)

// Host is what the feature needs of the daemon.
type Host interface {
	// DataDir is the daemon's data directory; releases live in
	// DataDir/releases.
	DataDir() string
	// Socket is the local Machine RPC socket the swap checks ployzd on.
	Socket() string
}

// Feature serves upgrade_machine, upgrade_plugin and upgrade_status.
type Feature struct {
	host Host
	log  hclog.Logger
}

// New returns the feature over host.
func New(host Host, log hclog.Logger) *Feature { return &Feature{host: host, log: log} }

// Routes are upgrade_status.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{rpc.Bind(rpc.ReadUpgradeStatus, func(context.Context, rpc.None) (rpc.UpgradeStatus, error) {
		st, err := ReadStatus(f.releasesDir())
		if errors.Is(err, os.ErrNotExist) {
			return st, rpc.Errorf(rpc.CodeNotFound, "this Machine has not been upgraded")
		}
		return st, err
	})}
}

// Streams are upgrade_machine and upgrade_plugin (docs/upgrades.md).
func (f *Feature) Streams() []rpc.StreamRoute {
	return []rpc.StreamRoute{
		rpc.BindStream(rpc.UpgradeMachine, f.upgradeMachine),
		rpc.BindStream(rpc.UpgradePlugin, f.upgradePlugin),
	}
}

func (f *Feature) releasesDir() string { return filepath.Join(f.host.DataDir(), "releases") }

// upgradeMachine receives a bundle, verifies it and starts the swap in a
// transient unit of its own: the swap restarts ployzd, so it cannot run
// inside it. The stream answers once the swap has started.
func (f *Feature) upgradeMachine(ctx context.Context, req rpc.UpgradeRequest, s rpc.StreamConn) error {
	req.Plugin = "" // only upgrade_plugin swaps one plugin
	if err := req.Validate(); err != nil {
		return err
	}
	if req.Version == version.Version {
		return rpc.Errorf(rpc.CodeConflict, "this Machine already runs %s", req.Version).With("version", req.Version)
	}
	return f.stageAndApply(ctx, req, s)
}

// upgradePlugin is upgrade_plugin: the same upload, checks and swap unit
// as upgradeMachine, for one bundled plugin only.
func (f *Feature) upgradePlugin(ctx context.Context, req rpc.UpgradeRequest, s rpc.StreamConn) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if !slices.Contains(pluginhost.Bundled, req.Plugin) {
		return rpc.Errorf(rpc.CodeInvalidArgument, "plugin: %q is not a plugin shipped in release bundles (%s)",
			req.Plugin, strings.Join(pluginhost.Bundled, ", ")).With("field", "plugin")
	}
	return f.stageAndApply(ctx, req, s)
}

// stageAndApply receives and verifies the bundle, then starts the swap.
func (f *Feature) stageAndApply(ctx context.Context, req rpc.UpgradeRequest, s rpc.StreamConn) error {
	if st, err := ReadStatus(f.releasesDir()); err == nil && !st.Terminal() && time.Since(time.UnixMilli(st.Started)) < 10*time.Minute {
		return rpc.Errorf(rpc.CodeConflict, "an upgrade to %s is running on this Machine", st.To)
	}
	dir, err := stageRelease(f.releasesDir(), req, images.RecvData(s))
	if err != nil {
		return err
	}
	id := newUpgradeID()
	if err := f.launchApply(ctx, id, req, dir); err != nil {
		return err
	}
	f.log.Info("upgrade started", "id", id, "from", version.Version, "to", req.Version, "plugin", req.Plugin)
	return rpc.UpgradeMachine.Send(s, rpc.UpgradeStarted{ID: id, From: version.Version, To: req.Version})
}

// stageRelease writes the uploaded bundle, checks its digest and its
// signature by a release key this ployzd was built with (the caller's
// check is not trusted: any member with RPC access can upload), and
// unpacks it into releases/<version> (replacing an unused earlier copy).
func stageRelease(root string, req rpc.UpgradeRequest, in io.Reader) (string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(root, ".upload-*.tar.gz")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(in, req.Size+1))
	if err != nil {
		return "", rpc.Errorf(rpc.CodeUnavailable, "receive bundle: %v", err)
	}
	if n != req.Size {
		return "", rpc.Errorf(rpc.CodeInvalidArgument, "size: received %d bytes, the request says %d", n, req.Size).With("field", "size")
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != req.SHA256 {
		return "", rpc.Errorf(rpc.CodeInvalidArgument, "sha256: the received bundle's digest is %s, the request says %s", got, req.SHA256).With("field", "sha256")
	}
	if err := verifySigned(req); err != nil {
		return "", err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	dir := filepath.Join(root, req.Version)
	if cur, _ := os.Readlink(filepath.Join(root, "current")); cur == req.Version {
		return "", rpc.Errorf(rpc.CodeConflict, "release %s is the current one", req.Version)
	}
	_ = os.RemoveAll(dir)
	m, err := release.Extract(tmp, dir, release.Target{OS: runtime.GOOS, Arch: runtime.GOARCH, ProtocolMajor: version.ProtocolMajor})
	if err != nil {
		return "", rpc.Errorf(rpc.CodeFailedPrecond, "%v", err)
	}
	if m.Version != req.Version {
		_ = os.RemoveAll(dir)
		return "", rpc.Errorf(rpc.CodeInvalidArgument, "version: the bundle is %s, the request says %s", m.Version, req.Version).With("field", "version")
	}
	return dir, nil
}

// verifySigned refuses an upload no trusted release key signed, naming
// the keys this Machine trusts.
func verifySigned(req rpc.UpgradeRequest) error {
	keys, err := release.TrustedKeys()
	if err != nil {
		return rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	name := release.BundleName(req.Version, runtime.GOOS, runtime.GOARCH)
	if _, err := release.VerifyBundle(name, req.SHA256, req.Size, req.Proof, keys); err != nil {
		return rpc.Errorf(rpc.CodeFailedPrecond, "the uploaded %v", err).With("field", "proof")
	}
	return nil
}

// launchApply starts `ployzd upgrade apply` from the running release in a
// transient unit, so it outlives the ployz.service restart it performs.
func (f *Feature) launchApply(ctx context.Context, id string, req rpc.UpgradeRequest, dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	st := rpc.UpgradeStatus{ID: id, From: version.Version, To: req.Version, Plugin: req.Plugin, State: rpc.UpgradeRunning, Started: time.Now().UnixMilli()}
	if err := WriteStatus(f.releasesDir(), st); err != nil {
		return err
	}
	args := []string{"--unit", "ployz-upgrade-" + id, "--collect", "--service-type=exec", "--quiet",
		exe, "upgrade", "apply", "--id", id, "--from", version.Version, "--to", req.Version,
		"--data-dir", f.host.DataDir(), "--socket", f.host.Socket()}
	if req.Plugin != "" {
		args = append(args, "--plugin", req.Plugin)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "systemd-run", args...).CombinedOutput(); err != nil {
		// Nothing changed: say so, so the next upgrade is not held back.
		st.State, st.Failed, st.Ended = rpc.UpgradeRolledBack, "start", time.Now().UnixMilli()
		st.Error = fmt.Sprintf("systemd-run: %v: %s", err, out)
		_ = WriteStatus(f.releasesDir(), st)
		return rpc.Errorf(rpc.CodeInternal, "start the swap: %s", st.Error)
	}
	return nil
}

func newUpgradeID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b)
}

// upgradeStatusPath holds the last upgrade's status (UpgradeStatus).
func upgradeStatusPath(root string) string { return filepath.Join(root, "upgrade.json") }

// ReadStatus reads the last upgrade's status.
func ReadStatus(root string) (rpc.UpgradeStatus, error) {
	var st rpc.UpgradeStatus
	b, err := os.ReadFile(upgradeStatusPath(root))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s: %w", upgradeStatusPath(root), err)
	}
	return st, nil
}

// WriteStatus replaces the status file atomically.
func WriteStatus(root string, st rpc.UpgradeStatus) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	tmp := upgradeStatusPath(root) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, upgradeStatusPath(root))
}

// StageBundleFile verifies and unpacks a bundle already on this Machine
// (`ployzd upgrade stage`, the SSH path for a Machine whose running
// release has no upgrade_machine route) exactly as an upload is.
func StageBundleFile(dataDir, path string, req rpc.UpgradeRequest) (string, error) {
	if err := req.Validate(); err != nil {
		return "", err
	}
	in, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	return stageRelease(filepath.Join(dataDir, "releases"), req, in)
}
