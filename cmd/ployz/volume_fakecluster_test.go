package main

import (
	"context"

	"github.com/ployz/ployz/client/volumerun"
	"github.com/ployz/ployz/core/rpc"
)

// fakecluster_test.go reads copies as Volume Runs did when they lived
// here (client/volumerun's tests have their own fake cluster now); these
// keep it compiling until it goes.
type copies = volumerun.Copies

func readCopies(c interface{ Context() context.Context }, s session, name string) (copies, error) {
	return volumerun.ReadCopies(c.Context(), s.ent, name)
}

func mountsVolume(spec *rpc.ContainerSpec, name string) bool {
	return volumerun.MountsVolume(spec, name)
}
