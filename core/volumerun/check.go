package volumerun

import (
	"errors"
	"fmt"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
	"github.com/ployz/ployz/sdk/volume"
)

// CheckCreate refuses a create the Machines would refuse, before any is
// asked, and returns the size in bytes. Errors name the operator's input
// (NAME, --machine, --size).
func CheckCreate(name, machine, size string) (uint64, error) {
	if err := CheckName(name); err != nil {
		return 0, err
	}
	if machine == "" {
		return 0, errors.New("--machine: required (the Machine whose pool holds the volume)")
	}
	n, err := volume.ParseSize(size)
	if err != nil {
		return 0, fmt.Errorf("--size: %w", err)
	}
	return n, nil
}

// CheckSetCopy refuses a set_volume_copy no Machine would admit, naming
// the input at fault (NAME, --machine, --expect, --want, --gen).
func CheckSetCopy(machine string, req rpc.SetVolumeCopyRequest) error {
	if err := CheckName(req.Volume); err != nil {
		return err
	}
	if machine == "" {
		return errors.New("--machine: required")
	}
	for _, r := range []struct{ flag, role string }{{"--expect", req.Expect}, {"--want", req.Want}} {
		if !volumecopy.ValidRole(r.role) {
			return fmt.Errorf("%s: %q is not a copy role (none, writer or mirror)", r.flag, r.role)
		}
	}
	if req.Gen == 0 {
		return errors.New("--gen: required (1 or more)")
	}
	return nil
}

// CheckSend refuses a send whose snapshots no Machine would accept,
// naming --snapshot or --from; a resume token names what it continues,
// so it needs neither.
func CheckSend(req rpc.SendVolumeRequest) error {
	if req.ResumeToken != "" {
		return nil
	}
	if err := volume.ValidSnapshot(req.Snapshot); err != nil {
		return fmt.Errorf("--snapshot: %w", err)
	}
	if req.FromSnapshot != "" {
		if err := volume.ValidSnapshot(req.FromSnapshot); err != nil {
			return fmt.Errorf("--from: %w", err)
		}
	}
	return nil
}
