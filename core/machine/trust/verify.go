package trust

import (
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/sdk/store"
)

// Status is a machines row's standing with this Machine.
type Status string

// The statuses. Signed, Enrolled and Unsigned rows are acted on; Refused
// ones are not.
const (
	// Signed: signed by the Machine itself with its trusted rpc_key.
	Signed Status = "signed"
	// Enrolled: written and signed by the entry Machine that endorsed it,
	// before the Machine published its own row.
	Enrolled Status = "enrolled"
	// Unsigned: written by a version without signatures, accepted only
	// while this Machine is not yet strict (an upgrade in progress).
	Unsigned Status = "unsigned"
	// Refused: forged, replayed, or not verifiable with a trusted key.
	Refused Status = "refused"
)

// Verdict is one row's standing.
type Verdict struct {
	Row    store.Row[store.MachineBody]
	Status Status
	// Reason says why a row was refused.
	Reason string
	// Use is what consumers act on for this Machine: the row itself when
	// accepted, the last accepted row when refused, nil when none.
	Use *store.Row[store.MachineBody]
}

// Verifier checks machines rows against this Machine's pins.
type Verifier struct {
	path    string
	selfKey string
	log     hclog.Logger

	mu     sync.Mutex
	pins   Pins
	logged map[string]string
}

// Open loads the pins at path. selfKey is this Machine's own rpc_key: its
// own rows are checked against it.
func Open(path, selfKey string, log hclog.Logger) (*Verifier, error) {
	p, err := LoadPins(path)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Verifier{path: path, selfKey: selfKey, log: log, pins: p, logged: map[string]string{}}, nil
}

// Pins returns a copy of the current pins.
func (v *Verifier) Pins() Pins {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := Pins{Strict: v.pins.Strict, Machines: make(map[string]Pin, len(v.pins.Machines))}
	for k, p := range v.pins.Machines {
		out.Machines[k] = p
	}
	return out
}

// Replace sets the pins (a founder: empty and strict; a joiner: what its
// entry exported) and saves them.
func (v *Verifier) Replace(p Pins) error {
	if p.Machines == nil {
		p.Machines = map[string]Pin{}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pins = p
	v.logged = map[string]string{}
	return SavePins(v.path, p)
}

// Forget deletes the pins (a reset).
func (v *Verifier) Forget() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pins = Pins{Machines: map[string]Pin{}}
	if err := os.Remove(v.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// SelfEndorsement is the endorsement this Machine repeats in its rows.
func (v *Verifier) SelfEndorsement(self string) *store.Endorsement {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pins.Machines[self].Endorsement
}

// SetSelfEndorsement keeps the endorsement a joiner's entry made.
func (v *Verifier) SetSelfEndorsement(self string, e *store.Endorsement) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.pins.Machines[self]
	p.Endorsement = e
	v.pins.Machines[self] = p
	return SavePins(v.path, v.pins)
}

// LastSignedAt is the signed_at of this Machine's last accepted own row,
// so its next one is never older even if the clock went back.
func (v *Verifier) LastSignedAt(self string) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.pins.Machines[self].SignedAt
}

// Accepted returns the rows consumers act on, one per Machine.
func Accepted(vs []Verdict) []store.Row[store.MachineBody] {
	var out []store.Row[store.MachineBody]
	for _, v := range vs {
		if v.Use != nil {
			out = append(out, *v.Use)
		}
	}
	return out
}

// Check decides every row (self is this Machine's id) and remembers what
// it accepted. Refusals are logged once per row and reason.
func (v *Verifier) Check(self string, rows []store.Row[store.MachineBody]) []Verdict {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Verdict, len(rows))
	done := make([]bool, len(rows))
	changed := false
	// Endorsements chain: a row endorsed by a Machine first trusted in
	// this same pass is decided in a later round.
	for progress := true; progress; {
		progress = false
		for i, r := range rows {
			if done[i] {
				continue
			}
			vd, pin, final := v.decide(self, r)
			if !final {
				continue
			}
			out[i], done[i], progress = vd, true, true
			if pin != nil {
				v.pins.Machines[r.Key] = *pin
				changed = true
			}
		}
	}
	allSigned := len(rows) > 0
	for i, r := range rows {
		if !done[i] {
			by := ""
			if r.Body.Endorsement != nil {
				by = r.Body.Endorsement.By
			}
			if r.Body.SignedBy != "" && r.Body.SignedBy != r.Key {
				by = r.Body.SignedBy
			}
			out[i] = v.refuse(r, fmt.Sprintf("endorsed by %s, a Machine this Machine does not trust", by))
		}
		if out[i].Status != Signed && out[i].Status != Enrolled {
			allSigned = false
		}
	}
	if allSigned && !v.pins.Strict {
		v.pins.Strict = true
		changed = true
		v.log.Info("every machines row is signed: unsigned rows are refused from now on")
	}
	if changed {
		if err := SavePins(v.path, v.pins); err != nil {
			v.log.Warn("save machine pins", "error", err)
		}
	}
	v.logRefusals(out)
	return out
}

func (v *Verifier) logRefusals(out []Verdict) {
	for _, vd := range out {
		id := vd.Row.Key
		if vd.Status != Refused {
			if _, ok := v.logged[id]; ok {
				delete(v.logged, id)
				v.log.Info("machines row accepted again", "machine", id, "name", vd.Row.Body.Name)
			}
			continue
		}
		key := vd.Reason + "\x00" + vd.Row.Raw
		if v.logged[id] == key {
			continue
		}
		v.logged[id] = key
		v.log.Warn("refused machines row", "machine", id, "name", vd.Row.Body.Name, "reason", vd.Reason,
			"acting_on_last_accepted", vd.Use != nil)
	}
}

// trusted returns the key this Machine trusts for id.
func (v *Verifier) trusted(self, id string) (string, bool) {
	if id == self && v.selfKey != "" {
		return v.selfKey, true
	}
	if p, ok := v.pins.Machines[id]; ok && p.Signed && p.RPCKey != "" {
		return p.RPCKey, true
	}
	return "", false
}

func (v *Verifier) refuse(r store.Row[store.MachineBody], reason string) Verdict {
	vd := Verdict{Row: r, Status: Refused, Reason: reason}
	if p, ok := v.pins.Machines[r.Key]; ok && p.Row != "" {
		if last, err := store.DecodeRow[store.MachineBody]("machines", []any{r.Key, p.Owner, p.Row, p.UpdatedAt}); err == nil {
			vd.Use = &last
		}
	}
	return vd
}

// decide returns the verdict on r and the pin to keep when accepted;
// final is false while r waits for its endorser to be trusted.
func (v *Verifier) decide(self string, r store.Row[store.MachineBody]) (Verdict, *Pin, bool) {
	id, b := r.Key, r.Body
	pin, pinned := v.pins.Machines[id]
	refused := func(format string, args ...any) (Verdict, *Pin, bool) {
		return v.refuse(r, fmt.Sprintf(format, args...)), nil, true
	}
	accept := func(st Status, next Pin) (Verdict, *Pin, bool) {
		next.Status, next.Owner, next.Row, next.UpdatedAt = st, r.Owner, r.Raw, r.UpdatedAt
		row := r
		return Verdict{Row: r, Status: st, Use: &row}, &next, true
	}
	if r.Owner != id {
		return refused("owner column is %q, not the Machine itself", r.Owner)
	}
	if pinned && pin.Status == Signed && pin.Row == r.Raw && pin.Owner == r.Owner {
		row := r // verified before, byte for byte
		return Verdict{Row: r, Status: Signed, Use: &row}, nil, true
	}
	if why := addressMismatch(b); why != "" {
		return refused("%s", why)
	}
	if b.Sig == "" {
		if why := v.unsignedRefusal(b, pin, pinned); why != "" {
			return refused("%s", why)
		}
		return accept(Unsigned, Pin{RPCKey: b.RPCKey, PublicKey: b.PublicKey})
	}
	if _, err := ParseKey(b.RPCKey); err != nil {
		return refused("signed, but %v", err)
	}
	xKey, known := v.trusted(self, id)
	if known && b.RPCKey != xKey {
		return refused("rpc_key changed: trusted %s, row says %s (keys are never replaced: remove the Machine and add it again)",
			fingerprint(xKey), fingerprint(b.RPCKey))
	}
	if pinned && pin.Signed && pin.PublicKey != "" && b.PublicKey != pin.PublicKey {
		return refused("public_key changed: trusted %s, row says %s", pin.PublicKey, b.PublicKey)
	}
	endorsed := func() (ok, final bool) { return v.endorsed(self, id, b) }
	if !known {
		ok, final := endorsed()
		switch {
		case !final:
			return Verdict{}, nil, false
		case ok:
		case b.Endorsement != nil:
			return refused("endorsement by %s does not verify", b.Endorsement.By)
		case !v.pins.Strict && (!pinned || pin.RPCKey == "" || pin.RPCKey == b.RPCKey):
			// First sight while upgrading: the Cluster had no endorsements.
		default:
			return refused("not endorsed by a Machine this Machine trusts")
		}
		xKey = b.RPCKey
	}
	msg, err := RowMessage(id, r.Raw)
	if err != nil {
		return refused("%v", err)
	}
	status, signerKey := Signed, xKey
	if b.SignedBy != "" && b.SignedBy != id {
		// The entry's enrollment row, valid only until the Machine's own.
		if pinned && pin.SelfSigned {
			return refused("signed by %s, but the Machine has published its own row since", b.SignedBy)
		}
		if b.Endorsement == nil || b.Endorsement.By != b.SignedBy {
			return refused("signed by %s, which did not endorse it", b.SignedBy)
		}
		ok, final := endorsed()
		if !final {
			return Verdict{}, nil, false
		}
		if !ok {
			return refused("endorsement by %s does not verify", b.SignedBy)
		}
		signerKey, _ = v.trusted(self, b.SignedBy)
		status = Enrolled
	}
	k, _ := ParseKey(signerKey)
	if !verify(k, msg, b.Sig) {
		return refused("signature does not verify with the rpc_key of %s (%s)", signerOf(b, id), fingerprint(signerKey))
	}
	if pinned && pin.Signed && b.SignedAt < pin.SignedAt {
		return refused("signed_at %d is older than the row already accepted (%d): a replay", b.SignedAt, pin.SignedAt)
	}
	next := Pin{RPCKey: xKey, PublicKey: b.PublicKey, Signed: true, SelfSigned: pin.SelfSigned || status == Signed,
		SignedAt: b.SignedAt, Endorsement: pin.Endorsement}
	if b.Endorsement != nil {
		next.Endorsement = b.Endorsement
	}
	return accept(status, next)
}

// addressMismatch is why a row's management_ip is not the address of its
// WireGuard key ("" when it is, or when the row names none).
func addressMismatch(b store.MachineBody) string {
	if b.ManagementIP == "" {
		return ""
	}
	k, err := wgtypes.ParseKey(b.PublicKey)
	if err != nil {
		return fmt.Sprintf("public_key %q is not a WireGuard key", b.PublicKey)
	}
	if want := meshaddr.ManagementIP(k).String(); b.ManagementIP != want {
		return fmt.Sprintf("management_ip %s is not public_key's address %s", b.ManagementIP, want)
	}
	return ""
}

// unsignedRefusal is why an unsigned row is refused ("" while a Cluster
// upgrades from unsigned rows and the row keeps the keys pinned for it).
func (v *Verifier) unsignedRefusal(b store.MachineBody, pin Pin, pinned bool) string {
	switch {
	case pinned && pin.Signed:
		return "unsigned, but this Machine's rows have been signed"
	case v.pins.Strict:
		return "unsigned (every Machine of this Cluster signs its row)"
	case pinned && (pin.RPCKey != b.RPCKey || pin.PublicKey != b.PublicKey):
		return "unsigned row changes rpc_key or public_key"
	}
	return ""
}

// endorsed checks b's endorsement of Machine id's keys: ok when it
// verifies with a trusted Machine's key; final is false while the
// endorser is not (yet) trusted.
func (v *Verifier) endorsed(self, id string, b store.MachineBody) (ok, final bool) {
	e := b.Endorsement
	if e == nil {
		return false, true
	}
	eKey, ok := v.trusted(self, e.By)
	if !ok {
		return false, false
	}
	k, _ := ParseKey(eKey)
	return verify(k, EndorsementMessage(id, b.RPCKey, b.PublicKey), e.Sig), true
}

func signerOf(b store.MachineBody, id string) string {
	if b.SignedBy != "" {
		return b.SignedBy
	}
	return id
}

func fingerprint(rpcKey string) string {
	k, err := ParseKey(rpcKey)
	if err != nil {
		return rpcKey
	}
	return Fingerprint(k)
}
