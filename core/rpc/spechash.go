package rpc

import (
	"encoding/hex"
	"fmt"
)

// spec_hash_key hands the deploy planner the key it salts spec hashes
// with. The hashes land in replicated `containers` rows and in Container
// labels; unsalted, a copy of store.db would let anyone test guesses of
// low-entropy environment values against them. The key is derived from
// the Cluster secret for this use only, so knowing it reveals nothing
// else, and only a caller Machine RPC already authenticated gets it.
const (
	CmdSpecHashKey = "spec_hash_key"
	CapSpecHashKey = "ployz.deploy.spec_hash_key.v1"
)

// SpecHashKey is spec_hash_key's answer: the key as hex (32 bytes).
type SpecHashKey struct {
	Key string `json:"key"`
}

// Bytes decodes the key, refusing anything but 32 bytes of hex.
func (k SpecHashKey) Bytes() ([]byte, error) {
	b, err := hex.DecodeString(k.Key)
	if err != nil {
		return nil, fmt.Errorf("field \"key\": %w", err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("field \"key\": %d bytes, want 32", len(b))
	}
	return b, nil
}
