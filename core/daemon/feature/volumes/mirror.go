package volumes

// The scheduled Sync (docs/volumes.md, "Protection on a schedule"): the
// protect loop also runs core/volprotect's Mirrorer, which starts one
// Volume Run of core/volumerun (the library `ployz volume sync` uses:
// same steps, same volume lease, same checks on each Machine) when a
// Writer here has a Mirror older than x-volume's mirror.every. The run
// is driven through this Machine's own Machine RPC socket, as an
// operator's CLI drives it through its entry: calls to the Mirror
// Machine are forwarded over the mesh as this Machine.

import (
	"context"
	"errors"

	"github.com/ployz/ployz/core/leasehold"
	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/core/volumerun"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// scheduleContext is the run context scheduled runs are recorded under.
const scheduleContext = "schedule"

// mirrorer is this Machine's Mirrorer, made once the store answers (its
// state, the failures and runs in flight, lives across rounds).
func (f *Feature) mirrorer() *volprotect.Mirrorer {
	f.mirrorMu.Lock()
	defer f.mirrorMu.Unlock()
	if f.mirror != nil {
		return f.mirror
	}
	st, err := f.host.Store()
	if err != nil {
		return nil
	}
	self := f.host.Machine().Name
	f.mirror = volprotect.NewMirrorer(volprotect.MirrorConfig{
		Self:     self,
		Policies: func(ctx context.Context) ([]volprotect.Declared, error) { return storedPolicies(ctx, st) },
		IsWriter: func(name string) bool { return f.CopyRoles()[name].Role == volumecopy.Writer },
		Lags: func(ctx context.Context, name string) ([]volprotect.Lag, error) {
			return storedLags(ctx, st, f.host.Machine().Name, name)
		},
		Machines: func(ctx context.Context) ([]volprotect.Machine, error) { return storedMachines(ctx, st) },
		Runs:     scheduledRuns{f},
		Log:      f.log.Named("mirror"),
	})
	return f.mirror
}

// storedMachines are the Cluster's participating Machines.
func storedMachines(ctx context.Context, st *sdkstore.Client) ([]volprotect.Machine, error) {
	rows, err := st.Machines().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []volprotect.Machine
	for _, r := range rows {
		if r.Body.Phase == string(machine.Participating) && r.Body.Name != "" {
			out = append(out, volprotect.Machine{Name: r.Body.Name, Labels: r.Body.Labels})
		}
	}
	return out, nil
}

// scheduledRuns runs the library's Level through this Machine's socket,
// recorded as volprotect.ScheduleOperator.
type scheduledRuns struct{ f *Feature }

func (s scheduledRuns) Level(ctx context.Context, volume string, candidates []string) (uint64, error) {
	c, err := rpc.DialUnix(s.f.host.Socket())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	log := s.f.log.Named("mirror").With("volume", volume)
	rn := volumerun.New(c, nil, scheduleContext, operator.Operator{Name: volprotect.ScheduleOperator(s.f.host.Machine().Name)}, func(e volumerun.Event) {
		if e.Kind == volumerun.EventProgress {
			log.Debug(e.Text, "step", e.Step, "machine", e.Machine)
			return
		}
		log.Info(e.Text, "event", e.Kind, "step", e.Step, "machine", e.Machine)
	})
	res, err := rn.Level(ctx, volume, candidates)
	var gen uint64
	if res.Run != nil {
		gen = res.Run.Gen
	}
	return gen, busyOr(res, err)
}

// busyOr is err as the Mirrorer reads it: a run refused before it
// opened because another holds the volume (its lease, an open run) is a
// *volprotect.BusyError, tried again next round rather than backed off.
func busyOr(res volumerun.Result, err error) error {
	var held *leasehold.HeldError
	var e *rpc.Error
	switch {
	case err == nil:
		return nil
	case res.Run == nil && (errors.As(err, &held) || errors.As(err, &e) && e.Code == rpc.CodeConflict && e.Details["gen"] != nil):
		return &volprotect.BusyError{Err: err}
	}
	return err
}
