package rpc

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/core/rpc/machinepb"
)

// portServer serves a few streaming commands of a Server on a port of
// their own (the volume transport, VolumePort): the same authentication
// as the mesh listener, every other command refused naming the port's
// purpose, and nothing forwarded to another Machine.
type portServer struct {
	machinepb.UnimplementedMachineServer
	s        *Server
	purpose  string
	commands []string
}

// PortServer returns a gRPC server for a mesh port that serves only the
// streaming commands named, authenticated as MeshServer is. purpose says
// what the port is for in every refusal ("port 7574 is the volume
// transport between Machines").
func (s *Server) PortServer(id *Identity, purpose string, commands ...string) *grpc.Server {
	return s.meshServer(id, &portServer{s: s, purpose: purpose, commands: commands})
}

func (p *portServer) refuse(command string) *Error {
	if slices.Contains(p.commands, command) {
		return nil
	}
	return Errorf(CodeUnsupported, "%s: it serves only %s, not %q (Machine RPC is on its own port)",
		p.purpose, strings.Join(p.commands, ", "), command).With("command", command)
}

// Call implements machinepb.MachineServer: the port serves no unary
// command.
func (p *portServer) Call(_ context.Context, f *machinepb.Frame) (*machinepb.Frame, error) {
	var req Request
	_ = json.Unmarshal(f.GetJson(), &req) // an empty command is refused as any other
	e := p.refuse(req.Command)
	if e == nil {
		e = Errorf(CodeInvalidArgument, "%s is a streaming command: use Stream", req.Command)
	}
	return frame(errResponse(e)), nil
}

// Stream implements machinepb.MachineServer.
func (p *portServer) Stream(gs machinepb.Machine_StreamServer) error {
	return p.s.serveStream(gs, p.refuse)
}

// AtPort is p with its address's port replaced by port, e.g. to dial its
// volume transport rather than its Machine RPC; p as is without an
// address.
func (p Peer) AtPort(port int) Peer {
	ap, err := netip.ParseAddrPort(p.Address)
	if err != nil {
		return p
	}
	p.Address = netip.AddrPortFrom(ap.Addr(), uint16(port)).String()
	return p
}
