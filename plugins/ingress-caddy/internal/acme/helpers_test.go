package acme

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// memStore is one replicated store every test Machine shares.
type memStore struct {
	mu       sync.Mutex
	certs    map[string]store.Row[store.CertificateBody]
	machines []store.Row[store.MachineBody]
	puts     []store.Row[store.CertificateBody]
	down     bool
}

func newMemStore(machines ...string) *memStore {
	s := &memStore{certs: map[string]store.Row[store.CertificateBody]{}}
	for _, id := range machines {
		s.machines = append(s.machines, store.Row[store.MachineBody]{Key: id, Owner: id, Body: store.MachineBody{Phase: "participating",
			Capabilities: []string{ingress.CapHTTP, ingress.CapSealedKeys}}})
	}
	return s
}

func (s *memStore) Certificates(context.Context) ([]store.Row[store.CertificateBody], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return nil, errors.New("store down")
	}
	var out []store.Row[store.CertificateBody]
	for _, r := range s.certs {
		out = append(out, r)
	}
	return out, nil
}

func (s *memStore) PutCertificate(_ context.Context, r store.Row[store.CertificateBody]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("store down")
	}
	if r.UpdatedAt == 0 {
		r.UpdatedAt = time.Now().UnixMilli()
	}
	s.certs[r.Key] = r
	s.puts = append(s.puts, r)
	return nil
}

func (s *memStore) Machines(context.Context) ([]store.Row[store.MachineBody], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Row[store.MachineBody](nil), s.machines...), nil
}

func (s *memStore) row(key string) (store.Row[store.CertificateBody], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.certs[key]
	return r, ok
}

// responder plays every Machine's proxy on HTTP-01: it answers a token
// from any of the managers' snapshots, or 404 while refusing.
type responder struct {
	mu       sync.Mutex
	managers []*Manager
	refuse   atomic.Bool
	served   atomic.Int32
}

func (r *responder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	tok, ok := strings.CutPrefix(req.URL.Path, "/.well-known/acme-challenge/")
	if !ok || r.refuse.Load() {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	ms := append([]*Manager(nil), r.managers...)
	r.mu.Unlock()
	for _, m := range ms {
		for _, c := range m.Snapshot().TLS.Challenges {
			if c.Token == tok {
				r.served.Add(1)
				w.Write([]byte(c.KeyAuthorization))
				return
			}
		}
	}
	http.NotFound(w, req)
}

// startResponder listens on a free 127.0.0.1 port and returns it.
func startResponder(t *testing.T, r *responder) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	_, p, _ := net.SplitHostPort(l.Addr().String())
	port, _ := strconv.Atoi(p)
	return port
}

// selfSigned returns PEM material for names valid from nb to na.
func selfSigned(t testing.TB, nb, na time.Time, names ...string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
}

func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
