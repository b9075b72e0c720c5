package rpc

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/ployz/ployz/core/machine/trust"
)

// IdentityFile is where a Machine keeps its RPC identity key, next to its
// record and WireGuard key.
const IdentityFile = "rpc.key"

// Identity is a Machine's RPC identity: an Ed25519 key whose public half
// is published in the Machine's row (rpc_key) and a self-signed
// certificate over it for mutual TLS on the mesh. The certificate carries
// no trust of its own: peers trust the key only because the replicated
// machines table names it.
type Identity struct {
	key  ed25519.PrivateKey
	cert tls.Certificate
}

// LoadOrCreateIdentity reads the identity key at path (PKCS#8 PEM),
// creating it with mode 0600 on first use. A key file readable by other
// users is refused: whoever reads it can act as this Machine.
func LoadOrCreateIdentity(path string) (*Identity, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return createIdentity(path)
	}
	if err != nil {
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("rpc identity %s: mode %v lets other users read this Machine's key; want 0600", path, fi.Mode().Perm())
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("rpc identity %s: not a PEM private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("rpc identity %s: key is %T, want Ed25519", path, k)
	}
	return NewIdentity(ek)
}

func createIdentity(path string) (*Identity, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// O_EXCL: two processes racing to create keep one key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateIdentity(path)
	}
	if err != nil {
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("rpc identity %s: %w", path, err)
	}
	return NewIdentity(k)
}

// NewIdentity wraps key with a fresh self-signed certificate.
func NewIdentity(key ed25519.PrivateKey) (*Identity, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ployz machine " + KeyFingerprint(key.Public().(ed25519.PublicKey))},
		NotBefore:    time.Now().Add(-time.Hour),
		// Validity is not what is checked (the key is); a long one keeps
		// clock skew between Machines irrelevant.
		NotAfter:    time.Now().AddDate(100, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("rpc identity certificate: %w", err)
	}
	return &Identity{key: key, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}, nil
}

// PublicKey is the identity's public key as published in rpc_key.
func (id *Identity) PublicKey() string {
	return EncodeRPCKey(id.key.Public().(ed25519.PublicKey))
}

// EncodeRPCKey is the rpc_key text form: standard base64 of the 32 raw bytes.
func EncodeRPCKey(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }

// ParseRPCKey parses an rpc_key (trust.ParseKey).
func ParseRPCKey(s string) (ed25519.PublicKey, error) { return trust.ParseKey(s) }

// KeyFingerprint is SHA256:<base64> of a public key, the form errors show.
func KeyFingerprint(k ed25519.PublicKey) string { return trust.Fingerprint(k) }

// certKey returns the Ed25519 key of a peer's leaf certificate.
func certKey(der []byte) (ed25519.PublicKey, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("peer certificate: %w", err)
	}
	k, ok := c.PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("peer certificate key is %T, want Ed25519", c.PublicKey)
	}
	return k, nil
}

// Sign signs msg with the identity key (machines rows and endorsements,
// core/machine/trust).
func (id *Identity) Sign(msg []byte) []byte { return ed25519.Sign(id.key, msg) }
