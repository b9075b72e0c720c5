package client

import (
	"context"
	"fmt"

	"github.com/ployz/ployz/core/volumerun"
	"github.com/ployz/ployz/core/volumes"
)

// VolumeRunner is the volume library (core/volumerun) on s's Entry
// Machine and store, recording runs under s's context and its operator,
// each run under its volume's lease held with s's LeaseWait; a Move's
// target pulls with the operator's registry credentials. onEvent may be
// nil.
func VolumeRunner(s *Session, onEvent func(volumerun.Event)) *volumerun.Runner {
	r := volumerun.New(s.Entry(), s.Store(), s.ContextName(), s.Operator(), onEvent)
	r.RegistryAuth = RegistryAuthFor
	r.Lease = func(ctx context.Context, scope, command string) (context.Context, func(), error) {
		return s.Hold(ctx, scope, command, r.LeaseLost)
	}
	return r
}

// Volumes lists the volumes of every Machine, or of the one machine
// names; a Machine that did not answer is named in a *PartialError
// beside the list.
func Volumes(ctx context.Context, rn *volumerun.Runner, machine string) ([]volumes.MachineVolumes, error) {
	ms, err := rn.List(ctx, MachineTarget(machine))
	if err == nil {
		if u := volumerun.Unanswered(ms); u != "" {
			err = partial(fmt.Errorf("volume list is partial%s", u))
		}
	}
	return ms, err
}
