// Package machine holds the local Machine record: this Machine's identity,
// its phase in the Cluster and what it needs to rejoin after a restart.
// It is Machine-local state (docs/architecture.md bet 6), persisted atomically under
// /var/lib/ployz, and part of the Stable promise: fields are only added,
// and readers ignore fields they do not know.
package machine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"

	"github.com/ployz/ployz/core/fieldpath"

	"github.com/ployz/ployz/internal/fsutil"
)

// Phase is the local Machine's lifecycle stage.
type Phase string

// The phases: uninitialized → joining → participating, and resetting on
// the way back to uninitialized. A reset is durable: a daemon that finds
// resetting on start finishes the reset before anything else.
const (
	Uninitialized Phase = "uninitialized"
	Joining       Phase = "joining"
	Participating Phase = "participating"
	Resetting     Phase = "resetting"
)

// Valid reports whether p is a phase this build knows.
func (p Phase) Valid() bool {
	switch p {
	case Uninitialized, Joining, Participating, Resetting:
		return true
	}
	return false
}

// Record is the local Machine record.
type Record struct {
	// ID is minted by this Machine when the record is first created and
	// never changes until a reset (docs/architecture.md bet 5).
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Phase Phase  `json:"phase"`
	// Subnet is this Machine's /24 of the Cluster network, chosen by the
	// operator from its allocation history.
	Subnet netip.Prefix `json:"subnet,omitzero"`
	// Network is the Cluster network the subnet belongs to.
	Network netip.Prefix `json:"network,omitzero"`
	// Endpoints are the addresses peers may reach this Machine's WireGuard on.
	Endpoints []netip.AddrPort `json:"endpoints,omitempty"`
	// Labels constrain placement; editing them never evicts Containers.
	Labels map[string]string `json:"labels,omitempty"`
	// JoinPeers are the Machines a joiner was given to reach the Cluster
	// before its store has the machines table; kept so a restart while
	// joining can resume.
	JoinPeers []Peer `json:"join_peers,omitempty"`
	// TargetVersions is the store version vector (site id → db version) a
	// joining Machine must reach before it participates.
	TargetVersions map[string]int64 `json:"target_versions,omitempty"`
}

// Peer is another Machine as the mesh needs it, in the record's own terms.
type Peer struct {
	ID        string           `json:"id"`
	Name      string           `json:"name,omitempty"`
	PublicKey string           `json:"public_key"`
	Subnet    netip.Prefix     `json:"subnet"`
	Endpoints []netip.AddrPort `json:"endpoints,omitempty"`
}

// NewID mints an opaque 32-hex Machine ID.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("machine id: %v", err)) // the kernel's RNG does not fail
	}
	return hex.EncodeToString(b[:])
}

// Load reads the record at path. A missing file is a fresh, uninitialized
// Machine with a newly minted ID (not yet saved).
func Load(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{ID: NewID(), Phase: Uninitialized}, nil
	}
	if err != nil {
		return Record{}, fmt.Errorf("machine record: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		if f := fieldpath.Locate(b, &r); f != "" {
			return Record{}, fmt.Errorf("machine record %s: field %s: %w", path, f, err)
		}
		return Record{}, fmt.Errorf("machine record %s: %w", path, err)
	}
	if r.ID == "" {
		return Record{}, fmt.Errorf("machine record %s: field id is empty", path)
	}
	if r.Phase == "" {
		r.Phase = Uninitialized
	}
	if !r.Phase.Valid() {
		return Record{}, fmt.Errorf("machine record %s: field phase: unknown phase %q", path, r.Phase)
	}
	return r, nil
}

// Save writes r to path atomically: a reader or a crash sees the old
// record or the new one, never a torn write.
func Save(path string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// WriteFileAtomic is fsutil.WriteFileAtomic, kept for its callers.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return fsutil.WriteFileAtomic(path, data, perm)
}
