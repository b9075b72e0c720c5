package release

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Shell runs one command on a Machine over SSH, stdin feeding it, and
// returns its output.
type Shell func(ctx context.Context, cmd string, stdin io.Reader) (string, error)

// releasesDir is where a Machine keeps its releases.
const releasesDir = "/var/lib/ployz/releases"

// PushSSH upgrades a Machine whose running release has no upgrade_machine
// route (an older release) over SSH: it copies the bundle there, has the
// bundle's own ployzd verify and unpack it (`ployzd upgrade stage`), and
// starts that ployzd's swap (`ployzd upgrade apply`) in a transient unit,
// the same swap a route starts. from is the running release's version. It
// returns the swap's id for AwaitSSH.
func PushSSH(ctx context.Context, sh Shell, b Bundle, from string) (string, error) {
	if err := ValidVersion(from); err != nil {
		return "", fmt.Errorf("running release: %w", err)
	}
	m := b.Manifest
	sum, _, err := Digest(b.Path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(b.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	id := newID()
	upload := fmt.Sprintf("%s/.upload-%s.tar.gz", releasesDir, id)
	if _, err := sh(ctx, fmt.Sprintf("mkdir -p %s && chmod 0700 %s && cat > %s", releasesDir, releasesDir, upload), f); err != nil {
		return "", fmt.Errorf("copy the bundle: %w", err)
	}
	// The proof goes beside it: the staging ployzd checks it as an upload.
	proof, _ := json.Marshal(b.Proof)
	if _, err := sh(ctx, fmt.Sprintf("cat > %s.proof", upload), bytes.NewReader(proof)); err != nil {
		return "", fmt.Errorf("copy the bundle's signature: %w", err)
	}
	// Every value below is a validated version, a hex digest or an id.
	// The bundle's ployzd runs from beside the releases: /tmp may be noexec.
	// A release older than signed bundles has no --proof (this CLI checked
	// the signature already).
	stage := fmt.Sprintf(`set -e; d=$(mktemp -d %[4]s/.stage-XXXXXX); trap 'rm -rf "$d" %[1]s %[1]s.proof' EXIT; `+
		`tar -xzf %[1]s -C "$d" bin/ployzd; p=; if "$d/bin/ployzd" upgrade stage --help | grep -q -e --proof; then p="--proof %[1]s.proof"; fi; `+
		`"$d/bin/ployzd" upgrade stage --bundle %[1]s $p --version %[2]s --sha256 %[3]s`,
		upload, m.Version, sum, releasesDir)
	if out, err := sh(ctx, stage, nil); err != nil {
		return "", fmt.Errorf("stage %s: %w: %s", m.Version, err, strings.TrimSpace(out))
	}
	status, _ := json.Marshal(rpc.UpgradeStatus{ID: id, From: from, To: m.Version, State: rpc.UpgradeRunning, Started: time.Now().UnixMilli()})
	start := fmt.Sprintf(`printf '%%s' '%s' > %s/upgrade.json && systemd-run --unit ployz-upgrade-%s --collect --service-type=exec --quiet `+
		`%s/%s/bin/ployzd upgrade apply --id %s --from %s --to %s`, status, releasesDir, id, releasesDir, m.Version, id, from, m.Version)
	if out, err := sh(ctx, start, nil); err != nil {
		return "", fmt.Errorf("start the swap: %w: %s", err, strings.TrimSpace(out))
	}
	return id, nil
}

// AwaitSSH polls the swap's status file over SSH until swap id has ended.
func AwaitSSH(ctx context.Context, sh Shell, id string, timeout time.Duration, each func(rpc.UpgradeStep)) (rpc.UpgradeStatus, error) {
	return poll(ctx, id, timeout, each, func(ctx context.Context) (rpc.UpgradeStatus, error) {
		var st rpc.UpgradeStatus
		out, err := sh(ctx, "cat "+releasesDir+"/upgrade.json", nil)
		if err != nil {
			return st, err
		}
		return st, json.Unmarshal([]byte(out), &st)
	})
}

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b)
}
