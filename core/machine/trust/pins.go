package trust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/ployz/ployz/internal/fsutil"
	"github.com/ployz/ployz/sdk/store"
)

// PinsFile is the pin file's name in the Machine's data directory.
const PinsFile = "machine-pins.json"

// Pins is what a Machine trusts about the others: Machine-local state,
// never replicated (it is what replication is checked against).
type Pins struct {
	// Strict refuses every unsigned row. A Cluster founded or joined by
	// this version is strict from the start; a Machine upgraded from an
	// older one turns strict once it has seen every row signed, and never
	// goes back.
	Strict   bool           `json:"strict"`
	Machines map[string]Pin `json:"machines,omitempty"`
}

// Pin is one Machine's trusted keys and its last accepted row.
type Pin struct {
	RPCKey    string `json:"rpc_key,omitempty"`
	PublicKey string `json:"public_key,omitempty"`
	// Signed: a signed row was accepted, so unsigned ones are refused and
	// RPCKey is the only key its rows may be signed with.
	Signed bool `json:"signed,omitempty"`
	// SelfSigned: the Machine published its own row, so a row signed by
	// its entry (enrollment) is refused from then on.
	SelfSigned bool `json:"self_signed,omitempty"`
	// SignedAt of the last accepted row; older rows are replays.
	SignedAt    int64              `json:"signed_at,omitempty"`
	Endorsement *store.Endorsement `json:"endorsement,omitempty"`
	// The last accepted row, acted on while a newer one is refused.
	Status    Status `json:"status,omitempty"`
	Owner     string `json:"owner,omitempty"`
	Row       string `json:"row,omitempty"`
	UpdatedAt int64  `json:"updated_at,omitempty"`
}

// LoadPins reads a pin file; a missing one is empty and not strict (a
// Machine upgraded from a version without pins).
func LoadPins(path string) (Pins, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Pins{Machines: map[string]Pin{}}, nil
	}
	if err != nil {
		return Pins{}, fmt.Errorf("machine pins: %w", err)
	}
	var p Pins
	if err := json.Unmarshal(b, &p); err != nil {
		return Pins{}, fmt.Errorf("machine pins %s: %w", path, err)
	}
	if p.Machines == nil {
		p.Machines = map[string]Pin{}
	}
	return p, nil
}

// SavePins writes the pin file atomically, mode 0600.
func SavePins(path string, p Pins) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// Export is what an entry hands a joiner through enrollment (the
// operator's authenticated path): the keys it trusts, itself (self, with
// WireGuard key wgKey) included, without rows.
func (v *Verifier) Export(self, wgKey string) Pins {
	p := v.Pins()
	out := Pins{Strict: p.Strict, Machines: map[string]Pin{}}
	for id, pin := range p.Machines {
		out.Machines[id] = Pin{RPCKey: pin.RPCKey, PublicKey: pin.PublicKey, Signed: pin.Signed,
			SelfSigned: pin.SelfSigned, SignedAt: pin.SignedAt, Endorsement: pin.Endorsement}
	}
	if v.selfKey != "" {
		me := out.Machines[self]
		me.RPCKey, me.PublicKey, me.Signed, me.SelfSigned = v.selfKey, wgKey, true, true
		out.Machines[self] = me
	}
	return out
}
