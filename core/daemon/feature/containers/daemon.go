package containers

import (
	"context"

	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// What the daemon asks of the Container commands besides their routes:
// the retire loop stops superseded Containers through their Docker.

// Docker is the Docker client, nil while this Machine has none.
func (o *Ops) Docker() client.APIClient {
	if o == nil || o.docker == nil {
		return nil
	}
	return o.docker
}

// Network is the Docker network Service Containers join.
func (o *Ops) Network() string { return o.network }

// Streams are the streamed Container commands (exec, run_container),
// refused while this Machine has no Docker client.
func (o *Ops) Streams() []rpc.StreamRoute {
	return []rpc.StreamRoute{withDocker(o, rpc.Exec, (*Ops).exec), withDocker(o, rpc.RunContainer, (*Ops).runContainer)}
}

// withDocker serves m with a stream of o, refused while it has no Docker.
func withDocker[Req, Event any](o *Ops, m rpc.StreamMethod[Req, Event], h func(*Ops, context.Context, Req, rpc.StreamConn) error) rpc.StreamRoute {
	return rpc.BindStream(m, func(ctx context.Context, req Req, s rpc.StreamConn) error {
		if o.docker == nil {
			return rpc.Errorf(rpc.CodeUnavailable, "docker is not available on this Machine")
		}
		return h(o, ctx, req, s)
	})
}

// Facts are the Machine facts the commands read now (Config.Facts).
func (o *Ops) Facts() Facts { return o.facts() }
