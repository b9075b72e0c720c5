package trust

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ployz/ployz/sdk/store"
)

// Signer is a Machine's RPC identity (rpc.Identity).
type Signer interface {
	// PublicKey is the rpc_key text form of the public half.
	PublicKey() string
	// Sign signs msg with the private half.
	Sign(msg []byte) []byte
}

// Domain separation: a row signature can never be replayed as an
// endorsement, or the other way round.
const (
	rowContext         = "ployz machine row v1"
	endorsementContext = "ployz machine endorsement v1"
)

// RowMessage is what a machines row's sig covers: the row's id and its
// body without "sig", as a JSON object with sorted top-level keys and
// every value exactly as written. Fields added by newer writers are
// covered too, so an older verifier still checks a newer row.
func RowMessage(id, raw string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		return nil, fmt.Errorf("machines row %s: body is not a JSON object: %w", id, err)
	}
	delete(fields, "sig")
	canon, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("machines row %s: %w", id, err)
	}
	return joinMsg(rowContext, id, string(canon)), nil
}

// EndorsementMessage is what an endorsement's sig covers.
func EndorsementMessage(id, rpcKey, publicKey string) []byte {
	return joinMsg(endorsementContext, id, rpcKey, publicKey)
}

func joinMsg(parts ...string) []byte {
	var b []byte
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

// Sign fills body's SignedBy (signerID, or empty when the Machine signs
// its own row) and Sig, signing the body as it will be stored. SignedAt
// must already be set.
func Sign(s Signer, signerID, id string, body *store.MachineBody) error {
	body.SignedBy = ""
	if signerID != id {
		body.SignedBy = signerID
	}
	body.Sig = ""
	raw, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("machines row %s: %w", id, err)
	}
	msg, err := RowMessage(id, string(raw))
	if err != nil {
		return err
	}
	body.Sig = base64.StdEncoding.EncodeToString(s.Sign(msg))
	return nil
}

// Endorse returns the endorsement by endorserID of Machine id's keys.
func Endorse(s Signer, endorserID, id, rpcKey, publicKey string) *store.Endorsement {
	return &store.Endorsement{By: endorserID,
		Sig: base64.StdEncoding.EncodeToString(s.Sign(EndorsementMessage(id, rpcKey, publicKey)))}
}

func verify(key ed25519.PublicKey, msg []byte, sig string) bool {
	b, err := base64.StdEncoding.DecodeString(sig)
	return err == nil && len(b) == ed25519.SignatureSize && ed25519.Verify(key, msg, b)
}

// ParseKey parses an rpc_key: standard base64 of a 32-byte Ed25519 key.
func ParseKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("rpc_key %q is not a base64 Ed25519 public key", s)
	}
	return ed25519.PublicKey(b), nil
}

// Fingerprint is SHA256:<base64> of a public key, the form errors show.
func Fingerprint(k ed25519.PublicKey) string {
	h := sha256.Sum256(k)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(h[:])
}

// SignOwn signs this Machine's own row: signed_at never goes back (even
// if the clock does), and the endorsement its entry made rides along so
// Machines that joined later can verify its key.
func (v *Verifier) SignOwn(s Signer, self string, body *store.MachineBody, now time.Time) error {
	body.SignedAt = max(now.UnixMilli(), v.LastSignedAt(self)+1)
	body.Endorsement = v.SelfEndorsement(self)
	return Sign(s, self, self, body)
}

// SignEnrollment is the entry's part of enrolling Machine id: it endorses
// the joiner's keys and signs the joiner's first row.
func SignEnrollment(s Signer, entryID, id string, body *store.MachineBody, now time.Time) error {
	if _, err := ParseKey(body.RPCKey); err != nil {
		return err
	}
	body.SignedAt = now.UnixMilli()
	body.Endorsement = Endorse(s, entryID, id, body.RPCKey, body.PublicKey)
	return Sign(s, entryID, id, body)
}
