// Command ployz-example is a complete, minimal Ployz plugin: a "dns" kind
// plugin that stores the spec it is given and reports it in Status. It
// answers no real DNS query; it exists to show a plugin author every piece
// (Info, Configure, one kind service, both run modes). See README.md.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

// version is the plugin's own release; stamp it with -ldflags "-X main.version=...".
var version = "0.1.0"

// configSchema documents the JSON Configure accepts.
const configSchema = `{
  "type": "object",
  "properties": {
    "listen_addrs": {"type": "array", "items": {"type": "string"}}
  },
  "additionalProperties": false
}`

type config struct {
	ListenAddrs []string `json:"listen_addrs"`
}

// server implements the DNS kind service from memory.
type server struct {
	dnsv1.UnimplementedDNSServer
	mu     sync.Mutex
	cfg    config
	digest string
}

// configure is idempotent: a long-lived plugin receives it after every host restart.
func (s *server) configure(_ context.Context, apiVersion uint32, raw []byte) error {
	var c config
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("decode config (API v%d): %w", apiVersion, err)
		}
	}
	s.mu.Lock()
	s.cfg = c
	s.mu.Unlock()
	return nil
}

// ApplySpec checks the spec is JSON and keeps its digest.
func (s *server) ApplySpec(_ context.Context, req *dnsv1.ApplySpecRequest) (*dnsv1.ApplySpecResponse, error) {
	if !json.Valid(req.GetSpec()) {
		return nil, status.Error(codes.InvalidArgument, "spec is not valid JSON")
	}
	sum := sha256.Sum256(req.GetSpec())
	s.mu.Lock()
	s.digest = hex.EncodeToString(sum[:])
	s.mu.Unlock()
	return &dnsv1.ApplySpecResponse{SpecSha256: s.digest}, nil
}

// Status reports the loaded spec and configured addresses.
func (s *server) Status(context.Context, *dnsv1.StatusRequest) (*dnsv1.StatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &dnsv1.StatusResponse{
		Serving:     s.digest != "",
		SpecSha256:  s.digest,
		ListenAddrs: append([]string(nil), s.cfg.ListenAddrs...),
	}, nil
}

func main() {
	srv := &server{}
	sdk.Main(&sdk.Plugin{
		Name:         "example",
		Kind:         sdk.KindDNS,
		Version:      version,
		Description:  "Example plugin: stores a DNS spec and reports it; answers no queries.",
		Capabilities: []string{"example.dns.spec-store.v1"},
		ConfigSchema: configSchema,
		Configure:    srv.configure,
		Register:     func(g *grpc.Server) { dnsv1.RegisterDNSServer(g, srv) },
	})
}
