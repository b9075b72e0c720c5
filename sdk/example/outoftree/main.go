// Command ployz-hello is the smallest Ployz plugin built outside the
// repository: a module of its own that imports only Ployz's sdk/
// packages, as a third party's plugin would. It serves the "dns" kind
// and answers Status with the number of specs it was handed; it answers
// no DNS query. See README.md; sdk/example is the full walkthrough.
package main

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

// server counts the specs it is handed; the embedded Unimplemented server
// answers every other call, so RPCs added to the kind later still compile.
type server struct {
	dnsv1.UnimplementedDNSServer
	specs atomic.Int64
}

func (s *server) ApplySpec(context.Context, *dnsv1.ApplySpecRequest) (*dnsv1.ApplySpecResponse, error) {
	s.specs.Add(1)
	return &dnsv1.ApplySpecResponse{}, nil
}

func (s *server) Status(context.Context, *dnsv1.StatusRequest) (*dnsv1.StatusResponse, error) {
	return &dnsv1.StatusResponse{Serving: s.specs.Load() > 0}, nil
}

func main() {
	srv := &server{}
	sdk.Main(&sdk.Plugin{
		Name:         "hello",
		Kind:         sdk.KindDNS,
		Version:      "0.1.0",
		Description:  "Out-of-tree example: counts the DNS specs it is handed.",
		Capabilities: []string{"hello.dns.count.v1"},
		Configure:    func(context.Context, uint32, []byte) error { return nil },
		Register:     func(g *grpc.Server) { dnsv1.RegisterDNSServer(g, srv) },
	})
}
