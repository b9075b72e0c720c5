package rpc

import (
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// Limits every Machine RPC listener enforces, so one caller cannot hold
// unbounded connections, streams or memory.
const (
	// MaxMessageBytes bounds one received frame (image chunks are 256 KiB).
	MaxMessageBytes = 4 << 20
	// MaxStreams bounds concurrent calls and streams on one connection.
	MaxStreams = 256
	// keepaliveTime/keepaliveTimeout: a silent connection is probed and,
	// unanswered, closed; clients may not ping more often than
	// minPingInterval (a faster one is disconnected).
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 20 * time.Second
	minPingInterval  = 10 * time.Second
	// handshakeTimeout bounds a connection's setup (TLS included).
	handshakeTimeout = 10 * time.Second
)

func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxConcurrentStreams(MaxStreams),
		grpc.MaxHeaderListSize(64 << 10),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
	}
}

// GRPCServer returns a gRPC server carrying s without authentication,
// for the local unix socket, whose file mode is its access control.
func (s *Server) GRPCServer() *grpc.Server {
	g := grpc.NewServer(serverOptions()...)
	machinepb.RegisterMachineServer(g, s)
	return g
}

// MeshServer returns the gRPC server for the mesh listener: mutual TLS
// with id, and every call admitted only from a participating Machine of
// s's peer list at its own management address (auth.go); connections not
// (yet) a participating Machine's are capped and closed soon (gate.go).
func (s *Server) MeshServer(id *Identity) *grpc.Server { return s.meshServer(id, s) }

// meshServer serves srv with the mesh listener's authentication.
func (s *Server) meshServer(id *Identity, srv machinepb.MachineServer) *grpc.Server {
	a := &meshAuth{peers: s.listPeers}
	opts := append(serverOptions(),
		grpc.Creds(&gatedCreds{TransportCredentials: credentials.NewTLS(serverTLS(id)), gate: &gate{}, auth: a}),
		grpc.ChainUnaryInterceptor(a.unary),
		grpc.ChainStreamInterceptor(a.stream),
	)
	g := grpc.NewServer(opts...)
	machinepb.RegisterMachineServer(g, srv)
	return g
}

// Serve serves s on l until l closes; for tests and simple callers.
func (s *Server) Serve(l net.Listener) error {
	return s.GRPCServer().Serve(l)
}
