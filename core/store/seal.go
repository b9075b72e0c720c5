package store

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// SealedPrefix starts a sealed value: "enc:v1:" + base64(24-byte nonce ‖
// XChaCha20-Poly1305 ciphertext and tag) (docs/formats.md).
const SealedPrefix = "enc:v1:"

// SavedStatePurpose derives the key that seals Saved State revisions'
// compose files in the revisions table.
const SavedStatePurpose = "saved-state"

// CertificateKeysPurpose derives the key that seals the certificates
// table's key_pem: the same key and associated data as the ingress
// plugin's (plugins/ingress-caddy/internal/acme/seal.go), so a key ployzd
// seals opens there.
const CertificateKeysPurpose = "certificate-keys"

// Sealer seals a row's field with a key derived from the Cluster secret
// for one purpose; the associated data binds a sealed value to its
// table, field and row, so it does not open anywhere else.
type Sealer struct {
	key          []byte
	table, field string
}

// NewSealer derives the sealer of table's field from secret.
func NewSealer(secret sdkstore.ClusterSecret, purpose, table, field string) (*Sealer, error) {
	if secret.IsZero() {
		return nil, errors.New("seal: the Cluster secret is empty")
	}
	return &Sealer{key: secret.Derive(purpose), table: table, field: field}, nil
}

func (s *Sealer) ad(row string) []byte {
	return []byte("ployz " + s.table + " " + s.field + " v1\x00" + strings.ToLower(row))
}

// Seal returns row's plain value sealed.
func (s *Sealer) Seal(row string, plain []byte) (string, error) {
	a, err := chacha20poly1305.NewX(s.key)
	if err != nil {
		return "", fmt.Errorf("seal %s of row %q: %w", s.field, row, err)
	}
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s of row %q: %w", s.field, row, err)
	}
	return SealedPrefix + base64.StdEncoding.EncodeToString(a.Seal(nonce, nonce, plain, s.ad(row))), nil
}

// Open returns row's sealed value in plain text, or an error naming the
// row and field when it is malformed, another Cluster's or tampered with.
func (s *Sealer) Open(row, stored string) ([]byte, error) {
	body, ok := strings.CutPrefix(stored, SealedPrefix)
	if !ok {
		return nil, fmt.Errorf("row %q: field %q is not sealed with v1", row, s.field)
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead {
		return nil, fmt.Errorf("row %q: field %q is not a well-formed sealed value", row, s.field)
	}
	a, err := chacha20poly1305.NewX(s.key)
	if err != nil {
		return nil, fmt.Errorf("open %s of row %q: %w", s.field, row, err)
	}
	n := chacha20poly1305.NonceSizeX
	pt, err := a.Open(nil, raw[:n], raw[n:], s.ad(row))
	if err != nil {
		return nil, fmt.Errorf("row %q: field %q does not open with this Cluster's key: sealed by another Cluster, or tampered with", row, s.field)
	}
	return pt, nil
}
