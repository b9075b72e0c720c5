package acme

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	xacme "golang.org/x/crypto/acme"

	"github.com/ployz/ployz/internal/fsutil"
)

// account is this Machine's registered ACME account.
type account struct {
	client *xacme.Client
}

// client returns the ACME client, registering the account (its key kept
// under StateDir per directory) on first use.
func (m *Manager) client(ctx context.Context) (*xacme.Client, error) {
	if m.acct != nil {
		return m.acct.client, nil
	}
	hc, err := httpClient(m.cfg.CAFile)
	if err != nil {
		return nil, err
	}
	key, err := accountKey(m.cfg.StateDir, m.cfg.Directory)
	if err != nil {
		return nil, err
	}
	cl := &xacme.Client{Key: key, DirectoryURL: m.cfg.Directory, HTTPClient: hc, UserAgent: "ployz-ingress"}
	acct := &xacme.Account{}
	if m.cfg.Email != "" {
		acct.Contact = []string{"mailto:" + m.cfg.Email}
	}
	if _, err := cl.Register(ctx, acct, xacme.AcceptTOS); err != nil && !errors.Is(err, xacme.ErrAccountAlreadyExists) {
		return nil, fmt.Errorf("acme account at %s: %w", m.cfg.Directory, err)
	}
	m.acct = &account{client: cl}
	return cl, nil
}

// httpClient trusts the system roots plus caFile's.
func httpClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("acme.ca_file: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("acme.ca_file %s: no PEM certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// accountKey loads or creates the account key for directory under
// stateDir/acme; an empty stateDir gives a fresh key.
func accountKey(stateDir, directory string) (crypto.Signer, error) {
	if stateDir == "" {
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	sum := sha256.Sum256([]byte(directory))
	path := filepath.Join(stateDir, "acme", hex.EncodeToString(sum[:8]), "account.key")
	if b, err := os.ReadFile(path); err == nil {
		if blk, _ := pem.Decode(b); blk != nil {
			if k, err := x509.ParseECPrivateKey(blk.Bytes); err == nil {
				return k, nil
			}
		}
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("acme account key: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("acme account key: %w", err)
	}
	return k, nil
}
