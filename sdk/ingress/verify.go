package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// VerifyNonceParam is VerifyPath's query parameter: the caller's nonce.
const VerifyNonceParam = "n"

// MaxVerifyNonce bounds a nonce's length.
const MaxVerifyNonce = 128

// VerifyAnswer is what a Machine answers on VerifyPath?n=nonce: an
// HMAC-SHA256 of the nonce keyed by its Machine id, hex. It names no
// Machine to a caller who does not already know the Cluster's ids, and
// differs for every nonce, so answers cannot be linked to each other.
// The verifier, which knows the ids, recomputes it for each of them.
func VerifyAnswer(machineID, nonce string) string {
	m := hmac.New(sha256.New, []byte(machineID))
	fmt.Fprintf(m, "ployz-verify\x00%s", nonce)
	return hex.EncodeToString(m.Sum(nil))
}
