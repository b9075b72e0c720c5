package rpc

import (
	"net"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// GRPCServer returns a gRPC server carrying s, ready to Serve listeners
// (the unix socket and the mesh TCP port share one).
func (s *Server) GRPCServer() *grpc.Server {
	g := grpc.NewServer()
	machinepb.RegisterMachineServer(g, s)
	return g
}

// Serve serves s on l until l closes; for tests and simple callers.
func (s *Server) Serve(l net.Listener) error {
	return s.GRPCServer().Serve(l)
}
