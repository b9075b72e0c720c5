package volumerun

import (
	"context"
	"slices"

	"github.com/ployz/ployz/core/rpc"
)

// Level brings name's Mirror on one of candidates level, as ployzd's
// scheduled Sync (x-volume's mirror) does, with the runs an operator
// would: a Sync when one of candidates holds a Mirror (it sends every
// Mirror the volume has), else a Mirror run to the first candidate
// with a ZFS pool that holds no copy yet. A candidate holding another
// role, one that did not answer, or none with a pool is refused before
// a run opens.
func (rn *Runner) Level(ctx context.Context, name string, candidates []string) (Result, error) {
	cp, err := rn.readCopies(ctx, name)
	if err != nil {
		return Result{}, err
	}
	for _, m := range candidates {
		if slices.Contains(cp.Mirrors, m) {
			return rn.Sync(ctx, name)
		}
	}
	for _, m := range candidates {
		if _, held := cp.Vols[m]; cp.Pools[m] && !held {
			return rn.Mirror(ctx, name, m)
		}
	}
	return Result{}, rpc.Errorf(rpc.CodeFailedPrecond, "mirror: none of %v can take a Mirror of %s (no ZFS pool, another copy there, or no answer%s)", candidates, name, cp.Note).With("field", "mirror")
}
