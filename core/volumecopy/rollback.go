package volumecopy

import "context"

// AdmitRollback admits returning volume's copy cur to an older snapshot
// for run gen (rollback_volume): the copy must be the Writer (a Mirror's
// data is the Writer's, and the next stream needs its newest snapshot),
// gen not below its floor, no running Container mounting it (it would
// see its files change under it) and no Container task on it (a start in
// flight would). A refusal names the field, with the copy.
func AdmitRollback(cur Copy, volume string, gen uint64, f Facts) error {
	if err := checkFloor(cur, gen, volume); err != nil {
		return err
	}
	if have := cur.RoleOf(); have != Writer {
		return refuse(cur, "volume", "volume %q's copy here is %s, not the Writer: only the Writer's copy is rolled back (a Mirror takes the Writer's data from the next sync)", volume, have)
	}
	if len(f.Busy) > 0 {
		return refuse(cur, "volume", "volume %q is busy on this Machine: %v holds its mount until Docker answers; ask again after",
			volume, f.Busy).With("busy", f.Busy)
	}
	if len(f.MountedBy) > 0 {
		return refuse(cur, "volume", "volume %q is mounted by running Container %v: stop it first (`ployz volume snapshot restore --stop` stops and starts it again)",
			volume, f.MountedBy).With("mounted_by", f.MountedBy)
	}
	return nil
}

// Rollback admits a rollback of volume for run gen (AdmitRollback) with
// facts read in the volume's turn, then runs do in it: a set_volume_copy
// or a task's admission for the volume waits until the rollback ended,
// so neither the role nor a Container changes under it. Only this
// volume's changes wait (Get and All answer meanwhile, and do may call
// them); the wait for the turn ends with ctx.
func (s *Store) Rollback(ctx context.Context, volume string, gen uint64, facts func() (Facts, error), do func() error) error {
	release, err := s.turn(ctx, volume)
	if err != nil {
		return err
	}
	defer release()
	f, err := facts()
	if err != nil {
		return err
	}
	if err := AdmitRollback(s.Get(volume), volume, gen, f); err != nil {
		return err
	}
	return do()
}
