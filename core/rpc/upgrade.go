package rpc

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

// Upgrade commands (docs/upgrades.md). upgrade_machine is a stream: the
// request names the bundle, data frames carry it; the Machine verifies its
// digest, unpacks it beside the running release and starts the swap, which
// runs outside ployzd (it restarts ployzd). upgrade_status reads how that
// swap went; the CLI polls it across the daemon's restart.
const (
	CmdUpgradeMachine = "upgrade_machine"
	CapUpgradeMachine = "ployz.machine.upgrade.v1"

	CmdUpgradeStatus = "upgrade_status"
	CapUpgradeStatus = "ployz.machine.upgrade_status.v1"

	// CmdUpgradePlugin swaps one bundled plugin onto the bundle's binary
	// and leaves everything else as it runs (`ployz plugin upgrade`). It
	// is a command of its own so a Machine that does not know it refuses
	// it by capability instead of running a whole upgrade.
	CmdUpgradePlugin = "upgrade_plugin"
	CapUpgradePlugin = "ployz.machine.upgrade_plugin.v1"
)

// MaxBundleBytes bounds one uploaded bundle.
const MaxBundleBytes = 1 << 30

// UpgradeRequest opens an upgrade_machine stream.
type UpgradeRequest struct {
	// Version is the bundle manifest's version; the upload is refused when
	// the bundle says otherwise.
	Version string `json:"version"`
	// SHA256 is the hex digest of the whole bundle file.
	SHA256 string `json:"sha256"`
	// Size is the bundle's length in bytes.
	Size int64 `json:"size"`
	// Plugin names the one plugin upgrade_plugin swaps (additive; only
	// that command reads it).
	Plugin string `json:"plugin,omitempty"`
	// Proof vouches for the bundle with a release key's signature
	// (additive): a Machine stages only a bundle one of the release keys
	// it was built with signed (docs/releases.md, "Signed bundles").
	Proof *BundleProof `json:"proof,omitempty"`
}

// BundleProof is what signs a bundle: its detached signature file
// (<bundle>.sig, over the bundle's sha256), or the signed index of the
// release that lists the bundle's sha256. Each field holds a file's
// bytes as written by `make release`.
type BundleProof struct {
	// Signature is the bundle's <bundle>.sig.
	Signature []byte `json:"signature,omitempty"`
	// Index and IndexSignature are release.json and release.json.sig.
	Index          []byte `json:"index,omitempty"`
	IndexSignature []byte `json:"index_signature,omitempty"`
}

// MaxProofBytes bounds each file of a BundleProof.
const MaxProofBytes = 1 << 20

var upgradePluginRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

var upgradeVersionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._+-]{0,63}$`)

// Validate names the first bad field.
func (r UpgradeRequest) Validate() error {
	if !upgradeVersionRE.MatchString(r.Version) || strings.Contains(r.Version, "..") {
		return Errorf(CodeInvalidArgument, "version: %q is not a release version", r.Version).With("field", "version")
	}
	if b, err := hex.DecodeString(r.SHA256); err != nil || len(b) != 32 {
		return Errorf(CodeInvalidArgument, "sha256: want the 64 hex digits of the bundle's sha256").With("field", "sha256")
	}
	if r.Size <= 0 || r.Size > MaxBundleBytes {
		return Errorf(CodeInvalidArgument, "size: %d, want 1..%d bytes", r.Size, MaxBundleBytes).With("field", "size")
	}
	if r.Plugin != "" && !upgradePluginRE.MatchString(r.Plugin) {
		return Errorf(CodeInvalidArgument, "plugin: %q is not a plugin name", r.Plugin).With("field", "plugin")
	}
	if p := r.Proof; p != nil {
		names := []string{"signature", "index", "index_signature"}
		for i, b := range [][]byte{p.Signature, p.Index, p.IndexSignature} {
			if len(b) > MaxProofBytes {
				return Errorf(CodeInvalidArgument, "proof.%s: %d bytes, want at most %d", names[i], len(b), MaxProofBytes).With("field", "proof."+names[i])
			}
		}
	}
	return nil
}

// Upgrade states.
const (
	UpgradeRunning    = "running"
	UpgradeDone       = "done"
	UpgradeRolledBack = "rolled_back"
	UpgradeFailed     = "failed" // the swap failed and so did the way back
)

// UpgradeStatus is a Machine's last upgrade as it stands.
type UpgradeStatus struct {
	ID      string        `json:"id"`
	From    string        `json:"from"`
	To      string        `json:"to"`
	Plugin  string        `json:"plugin,omitempty"` // set when only this plugin was swapped
	State   string        `json:"state"`
	Steps   []UpgradeStep `json:"steps"`
	Failed  string        `json:"failed_step,omitempty"`
	Error   string        `json:"error,omitempty"`
	Started int64         `json:"started_unix_ms"`
	Ended   int64         `json:"ended_unix_ms,omitempty"`
}

// Terminal reports whether the swap has ended.
func (s UpgradeStatus) Terminal() bool { return s.State != "" && s.State != UpgradeRunning }

// UpgradeStep is one step of a swap or of its way back.
type UpgradeStep struct {
	Name     string `json:"name"`
	Release  string `json:"release"`
	Outcome  string `json:"outcome"` // ok, failed
	Detail   string `json:"detail,omitempty"`
	Millis   int64  `json:"ms"`
	Rollback bool   `json:"rollback,omitempty"`
}

// UpgradeStarted is upgrade_machine's event once the swap runs.
type UpgradeStarted struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
}

func (s UpgradeStatus) String() string {
	return fmt.Sprintf("%s→%s %s", s.From, s.To, s.State)
}
