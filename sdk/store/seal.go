package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// SealedPrefix starts a sealed value: "enc:v1:" + base64(24-byte nonce ‖
// XChaCha20-Poly1305 ciphertext and tag) (docs/formats.md).
const SealedPrefix = "enc:v1:"

// Sealer seals a row's field with a key derived from the Cluster secret
// for one purpose; the associated data binds a sealed value to its
// table, field and row, so it does not open anywhere else.
type Sealer struct {
	key          []byte
	table, field string
}

// NewSealer derives the sealer of table's field from secret.
func NewSealer(secret ClusterSecret, purpose, table, field string) (*Sealer, error) {
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
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s of row %q: %w", s.field, row, err)
	}
	return s.sealWith(nonce, row, plain)
}

// SealStable is Seal with a nonce derived from the key, row and value
// (HMAC-SHA256, first 24 bytes), so sealing the same value again gives
// the same text: for a row its writer rewrites only when its body
// changed. It shows that two sealed values are equal, nothing more.
func (s *Sealer) SealStable(row string, plain []byte) (string, error) {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("nonce\x00"))
	m.Write(s.ad(row))
	m.Write([]byte{0})
	m.Write(plain)
	return s.sealWith(m.Sum(nil)[:chacha20poly1305.NonceSizeX], row, plain)
}

func (s *Sealer) sealWith(nonce []byte, row string, plain []byte) (string, error) {
	a, err := chacha20poly1305.NewX(s.key)
	if err != nil {
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
