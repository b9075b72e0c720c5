package rpc

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// salt_spec_hashes turns the deploy planner's spec digests into salted
// spec hashes. The hashes land in replicated `containers` rows and in
// Container labels; unsalted, a copy of store.db would let anyone test
// guesses of low-entropy environment values against them. The salt is a
// key derived from the Cluster secret for this use only; it never leaves
// the Machines, so the planner (in the CLI) sends digests and gets hashes.
const (
	CmdSaltSpecHashes = "salt_spec_hashes"
	CapSaltSpecHashes = "ployz.deploy.salt_spec_hashes.v1"
	// MaxSpecDigests bounds one call: a Deploy sends one digest per
	// Service and per x-pre_deploy hook.
	MaxSpecDigests = 4096
	// SaltedSpecHashPrefix marks a salted hash, so a salted and an
	// unsalted hash never compare equal by accident and a reader can
	// tell which kind a row carries.
	SaltedSpecHashPrefix = "s1:"
	// SpecHashPurpose is the Cluster secret derivation the salt uses.
	SpecHashPurpose = "spec-hash"
)

// SaltSpecHashesRequest carries the SHA-256 digests (64 lowercase hex
// digits) of the specs to salt.
type SaltSpecHashesRequest struct {
	Digests []string `json:"digests"`
}

// SaltSpecHashesResult has one salted hash per digest, in request order.
type SaltSpecHashesResult struct {
	Hashes []string `json:"hashes"`
}

// Validate refuses a malformed request, naming the field.
func (r SaltSpecHashesRequest) Validate() error {
	if len(r.Digests) == 0 {
		return InvalidField("digests", "empty: send at least one spec digest")
	}
	if len(r.Digests) > MaxSpecDigests {
		return InvalidField("digests", "%d digests, at most %d per call", len(r.Digests), MaxSpecDigests)
	}
	for i, d := range r.Digests {
		b, err := hex.DecodeString(d)
		if err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != d {
			return InvalidField(fmt.Sprintf("digests[%d]", i), "%q is not a SHA-256 digest (64 lowercase hex digits)", clip(d))
		}
	}
	return nil
}

// SaltSpecDigest is the salted spec hash of one digest under key:
// the prefix and the first 8 bytes of HMAC-SHA256 as hex.
func SaltSpecDigest(key []byte, digest string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(digest))
	return SaltedSpecHashPrefix + hex.EncodeToString(m.Sum(nil)[:8])
}

// clip shortens a refused value for the error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
