package acme

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// SealedPrefix starts a certificates row's key_pem that is sealed: the
// private key encrypted under the Cluster key. The whole form is
// "enc:v1:" + base64(24-byte nonce ‖ XChaCha20-Poly1305 ciphertext and
// tag), with the row's lower-cased name as associated data, so a sealed
// key copied into another row does not open (docs/formats.md).
const SealedPrefix = "enc:v1:"

// sealPurpose labels the key derived from the Cluster secret for
// certificate private keys; no other use derives it.
const sealPurpose = "certificate-keys"

// Sealer seals and opens certificate private keys with a key derived from
// the Cluster secret, which stays in a 0600 file on each Machine's disk:
// a reader of the replicated store alone never sees a private key.
type Sealer struct {
	key []byte
	dns *store.Sealer // DNS providers' secret settings
}

// NewSealer derives the certificate-key sealer of secret.
func NewSealer(secret store.ClusterSecret) (*Sealer, error) {
	if secret.IsZero() {
		return nil, errors.New("certificate keys: the Cluster secret is empty")
	}
	dns, err := store.NewSealer(secret, ingress.DNSProviderSecretsPurpose, "certificates", ingress.DNSProviderSecretsField)
	if err != nil {
		return nil, err
	}
	return &Sealer{key: secret.Derive(sealPurpose), dns: dns}, nil
}

// OpenDNSSecrets opens a DNS provider row's sealed secret settings (a
// JSON object); an error names the row and field. A nil Sealer (no
// cluster_secret_file in the ingress spec) opens nothing.
func (s *Sealer) OpenDNSSecrets(row, stored string) (map[string]string, error) {
	if stored == "" {
		return map[string]string{}, nil
	}
	if s == nil {
		return nil, fmt.Errorf(`row %q: field %q is sealed and this Machine has no Cluster secret to open it (no cluster_secret_file in the ingress spec)`, row, ingress.DNSProviderSecretsField)
	}
	raw, err := s.dns.Open(row, stored)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf(`row %q: field %q does not hold a JSON object of secrets`, row, ingress.DNSProviderSecretsField)
	}
	return out, nil
}

// LoadSealer reads the Cluster secret at path (store.ReadClusterSecretFile:
// refused unless 0600); an empty path gives nil, which leaves keys in
// plain text (tests, or a daemon that predates the field).
func LoadSealer(path string) (*Sealer, error) {
	if path == "" {
		return nil, nil
	}
	s, err := store.ReadClusterSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("certificate keys: %w", err)
	}
	return NewSealer(s)
}

// sealAD binds a sealed key to its row.
func sealAD(row string) []byte {
	return []byte("ployz certificates key_pem v1\x00" + strings.ToLower(row))
}

// Seal returns row's keyPEM in its sealed form.
func (s *Sealer) Seal(row, keyPEM string) (string, error) {
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal key_pem of row %q: %w", row, err)
	}
	return s.sealWith(nonce, row, keyPEM)
}

func (s *Sealer) sealWith(nonce []byte, row, keyPEM string) (string, error) {
	a, err := chacha20poly1305.NewX(s.key)
	if err != nil {
		return "", fmt.Errorf("seal key_pem of row %q: %w", row, err)
	}
	out := a.Seal(nonce, nonce, []byte(keyPEM), sealAD(row))
	return SealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open returns row's key_pem in plain text: a sealed value is opened (an
// error names the row when it is malformed, another Cluster's or
// tampered with); a plain one, as written before keys were sealed, is
// returned as is with plain true.
func (s *Sealer) Open(row, stored string) (keyPEM string, plain bool, err error) {
	if !strings.HasPrefix(stored, "enc:") {
		return stored, true, nil
	}
	body, ok := strings.CutPrefix(stored, SealedPrefix)
	if !ok {
		v, _, _ := strings.Cut(strings.TrimPrefix(stored, "enc:"), ":")
		return "", false, fmt.Errorf(`row %q: field "key_pem" is sealed with version %q; this Machine knows only v1 (upgrade ployz)`, row, v)
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+chacha20poly1305.Overhead {
		return "", false, fmt.Errorf(`row %q: field "key_pem" is not a well-formed sealed key`, row)
	}
	a, err := chacha20poly1305.NewX(s.key)
	if err != nil {
		return "", false, fmt.Errorf("open key_pem of row %q: %w", row, err)
	}
	n := chacha20poly1305.NonceSizeX
	pt, err := a.Open(nil, raw[:n], raw[n:], sealAD(row))
	if err != nil {
		return "", false, fmt.Errorf(`row %q: field "key_pem" does not open with this Cluster's key: sealed by another Cluster, or tampered with`, row)
	}
	return string(pt), false, nil
}

// sealingStore seals private keys on their way into the store and opens
// them on their way out, so the Manager works in plain text. A row it
// cannot open keeps its sealed key_pem, which parseMaterial refuses
// (never served); a valid plain row, as written before sealing, is
// rewritten sealed.
//
// It seals only while every participating Machine that runs an ingress
// advertises ingress.CapSealedKeys (sealingAllowed): a Machine on an older
// version cannot open a sealed key, would order the certificate again and
// write it plain, and the two versions would take turns re-ordering.
// Until then keys are written plain, as the older version does.
type sealingStore struct {
	Store
	keys *Sealer
	log  hclog.Logger
	gate *sealGate
}

func newSealingStore(st Store, keys *Sealer, log hclog.Logger) sealingStore {
	return sealingStore{Store: st, keys: keys, log: logOrNull(log), gate: &sealGate{}}
}

// sealGate remembers the last decision, to log when it changes.
type sealGate struct {
	mu      sync.Mutex
	decided bool
	open    bool
}

// sealingAllowed reports whether every participating Machine running an
// ingress can open sealed keys; if not, it names one that cannot.
func sealingAllowed(rows []store.Row[store.MachineBody]) (bool, string) {
	return ingress.SealingAllowed(rows, ingress.CapSealedKeys)
}

// sealing decides, from the machines table now, whether to seal. A store
// error keeps the last decision (plain before the first).
func (s sealingStore) sealing(ctx context.Context) bool {
	rows, err := s.Store.Machines(ctx)
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if err != nil {
		return s.gate.open
	}
	open, why := sealingAllowed(rows)
	if !s.gate.decided || open != s.gate.open {
		if open {
			s.log.Info("certificate: every ingress Machine reads sealed keys; sealing private keys")
		} else {
			s.log.Warn("certificate: writing private keys in plain text until every ingress Machine reads sealed keys", "because", why)
		}
	}
	s.gate.decided, s.gate.open = true, open
	return open
}

// Certificates implements Store.
func (s sealingStore) Certificates(ctx context.Context) ([]store.Row[store.CertificateBody], error) {
	rows, err := s.Store.Certificates(ctx)
	if err != nil {
		return nil, err
	}
	for i, r := range rows {
		if r.Body.KeyPEM == "" {
			continue
		}
		key, plain, err := s.keys.Open(r.Key, r.Body.KeyPEM)
		if err != nil {
			s.log.Error("certificate: not serving a row whose private key does not open", "row", r.Key, "error", err)
			continue
		}
		rows[i].Body.KeyPEM = key
		if plain && r.Body.Challenge == nil && s.sealing(ctx) { // an issuance in progress rewrites the row itself
			if _, err := parseMaterial(strings.ToLower(r.Key), r.Body); err == nil {
				if err := s.PutCertificate(ctx, r); err != nil {
					s.log.Warn("certificate: seal a plain-text private key", "row", r.Key, "error", err)
				} else {
					s.log.Info("certificate: sealed a plain-text private key", "row", r.Key)
				}
			}
		}
	}
	return rows, nil
}

// PutCertificate implements Store, sealing a plain key_pem.
func (s sealingStore) PutCertificate(ctx context.Context, r store.Row[store.CertificateBody]) error {
	if r.Body.KeyPEM != "" && !strings.HasPrefix(r.Body.KeyPEM, "enc:") && s.sealing(ctx) {
		k, err := s.keys.Seal(r.Key, r.Body.KeyPEM)
		if err != nil {
			return err
		}
		r.Body.KeyPEM = k
	}
	return s.Store.PutCertificate(ctx, r)
}

func logOrNull(l hclog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return l
}
