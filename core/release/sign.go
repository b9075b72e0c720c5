package release

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// trustedKeys are the release public keys this build trusts: base64
// Ed25519 keys, comma separated, set at link time by `make build` and
// `make release` (-X github.com/ployz/ployz/core/release.trustedKeys=...
// from RELEASE_PUBKEYS, and the public half of RELEASE_KEY). Empty means
// no release is trusted: a channel refuses every release.
var trustedKeys = ""

// testKeys, when set, replace trustedKeys. Only tests set it
// (TrustForTest); no flag, file or environment variable reaches it, so a
// shipped binary trusts exactly the keys it was linked with.
var testKeys []ed25519.PublicKey

// TrustForTest makes this process trust only keys until the returned
// function is called. For tests of the verification itself: a shipped
// binary never calls it.
func TrustForTest(keys ...ed25519.PublicKey) (restore func()) {
	old := testKeys
	testKeys = keys
	return func() { testKeys = old }
}

// TrustNewKeyForTest makes this process trust only a new release key
// until restore is called, and returns the key to sign with. For tests.
func TrustNewKeyForTest() (key ed25519.PrivateKey, restore func()) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // the system's random source failed
	}
	return key, TrustForTest(pub)
}

// TrustedKeys are the release keys this build accepts signatures from.
func TrustedKeys() ([]ed25519.PublicKey, error) {
	if testKeys != nil {
		return testKeys, nil
	}
	var keys []ed25519.PublicKey
	for _, s := range strings.Split(trustedKeys, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, err := ParsePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("trusted release key linked into this build: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// KeyID names a public key in errors and signatures: the first 8 bytes
// of its sha256, in hex.
func KeyID(k ed25519.PublicKey) string {
	h := sha256.Sum256(k)
	return hex.EncodeToString(h[:8])
}

// ParsePublicKey reads a base64 Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("release public key %q: want %d bytes of base64", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// GenerateKey returns a new release key: the private key file's text (the
// base64 seed) and the base64 public key.
func GenerateKey() (private, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(priv.Seed()) + "\n", base64.StdEncoding.EncodeToString(pub), nil
}

// ParsePrivateKey reads a release key's base64 seed (GenerateKey's
// private text); what names where it came from in errors.
func ParsePrivateKey(text, what string) (ed25519.PrivateKey, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != ed25519.SeedSize {
		return nil, fmt.Errorf("release key %s: want the %d-byte seed in base64 (as `go run ./internal/releasekey gen` writes it)", what, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(b), nil
}

// EnvReleaseKey holds the release key's text when no key file is named
// (a CI secret).
const EnvReleaseKey = "PLOYZ_RELEASE_KEY"

// LoadPrivateKey reads the release key from file, else from
// $PLOYZ_RELEASE_KEY; neither is an error naming both.
func LoadPrivateKey(file string) (ed25519.PrivateKey, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("release key: %w", err)
		}
		return ParsePrivateKey(string(b), file)
	}
	if v := os.Getenv(EnvReleaseKey); v != "" {
		return ParsePrivateKey(v, "$"+EnvReleaseKey)
	}
	return nil, fmt.Errorf("release key: pass a key file (RELEASE_KEY=FILE) or set $%s; `go run ./internal/releasekey gen FILE` makes one", EnvReleaseKey)
}

// Signature is a detached signature file (IndexName + ".sig"): one entry
// per signing key, so a key can be rotated with both signing for a while.
type Signature struct {
	Signatures []KeySignature `json:"signatures"`
}

// KeySignature is one key's Ed25519 signature over the index's bytes.
type KeySignature struct {
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"` // base64
}

// Sign signs the index bytes with key.
func Sign(index []byte, key ed25519.PrivateKey) []byte {
	pub := key.Public().(ed25519.PublicKey)
	s := Signature{Signatures: []KeySignature{{KeyID: KeyID(pub), Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, index))}}}
	b, _ := json.MarshalIndent(s, "", "  ")
	return append(b, '\n')
}

// ErrUntrusted is wrapped by every refusal of Verify.
var ErrUntrusted = errors.New("release signature refused")

// Verify checks that sig holds a valid signature over index by one of
// keys. name is the index's location, named in every refusal with the
// keys involved.
func Verify(name string, index, sig []byte, keys []ed25519.PublicKey) error {
	_, err := VerifyKey(name, index, sig, keys)
	return err
}

// VerifyKey is Verify returning the id of the trusted key that signed.
func VerifyKey(name string, index, sig []byte, keys []ed25519.PublicKey) (string, error) {
	id, reason := checkSignature(name+SigSuffix, index, sig, keys)
	if reason != "" {
		return "", fmt.Errorf("%w: %s: %s", ErrUntrusted, name, reason)
	}
	return id, nil
}

// checkSignature returns the id of the trusted key whose signature in
// sig (the file sigName) verifies over data, or why none does.
func checkSignature(sigName string, data, sig []byte, keys []ed25519.PublicKey) (keyID, reason string) {
	if len(keys) == 0 {
		return "", "this build trusts no release key (it was built without RELEASE_PUBKEYS or RELEASE_KEY)"
	}
	if sig == nil {
		return "", fmt.Sprintf("unsigned (no %s)", sigName)
	}
	var s Signature
	if err := json.Unmarshal(sig, &s); err != nil || len(s.Signatures) == 0 {
		return "", fmt.Sprintf("%s is not a signature file", sigName)
	}
	var seen []string
	for _, ks := range s.Signatures {
		seen = append(seen, ks.KeyID)
		for _, k := range keys {
			if KeyID(k) != ks.KeyID {
				continue
			}
			raw, err := base64.StdEncoding.DecodeString(ks.Signature)
			if err != nil || !ed25519.Verify(k, data, raw) {
				return "", fmt.Sprintf("the signature by key %s does not match its content (tampered, or signed over other bytes)", ks.KeyID)
			}
			return ks.KeyID, ""
		}
	}
	return "", fmt.Sprintf("signed by key %s, which this build does not trust (it trusts %s)", strings.Join(seen, ", "), keyIDs(keys))
}

// keyIDs lists keys by id for messages ("none" for no key).
func keyIDs(keys []ed25519.PublicKey) string {
	if len(keys) == 0 {
		return "none"
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = KeyID(k)
	}
	return strings.Join(ids, ", ")
}
