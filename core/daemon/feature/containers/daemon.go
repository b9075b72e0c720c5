package containers

import (
	"context"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/client"

	"github.com/ployz/ployz/core/rpc"
)

// What the daemon's other loops ask of the Container commands: the
// observe loop publishes rows from their observations and readiness,
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

// Restore re-binds the notify sockets of existing Containers, once per
// daemon (retried by the next caller when Docker did not answer).
func (o *Ops) Restore(ctx context.Context) { o.restore(ctx) }

// ReadyChanged hears each change of a notify verdict, which changes no
// Docker state but a row.
func (o *Ops) ReadyChanged() <-chan struct{} { return o.ready.changed }

// Event hears a Docker container event (the exit log keeps exit codes).
func (o *Ops) Event(m events.Message) { o.exits.event(m) }

// Prune forgets the readiness of Containers not in exist.
func (o *Ops) Prune(exist map[string]bool) { o.ready.prune(exist) }

// Observe is a Service Container as the Container commands report it.
func (o *Ops) Observe(in container.InspectResponse) rpc.ContainerObservation {
	return o.observe(in, "")
}

// Facts are the Machine facts the commands read now (Config.Facts).
func (o *Ops) Facts() Facts { return o.facts() }
