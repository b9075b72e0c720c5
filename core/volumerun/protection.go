package volumerun

import (
	"context"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
	"github.com/ployz/ployz/core/volumecopy"
)

// protectionRuns bounds the runs `volume inspect` reads for a Mirror's
// lag: a Mirror not sent to in the newest ones is reported unknown.
const protectionRuns = 50

// Protection is what `ployz volume inspect` reports of a volume's
// protection: its automatic snapshots (x-volume) and how far each Mirror
// is behind.
type Protection struct {
	// LastSnapshot is the newest automatic snapshot's time (nil: none).
	LastSnapshot *time.Time `json:"last_snapshot,omitempty"`
	// SnapshotsKept counts the automatic snapshots there.
	SnapshotsKept int         `json:"snapshots_kept"`
	Mirrors       []MirrorLag `json:"mirrors,omitempty"`
	// Scheduled is the newest run the Writer's Machine started on its
	// own (x-volume's mirror), when one is on record.
	Scheduled *ScheduledRun `json:"scheduled_run,omitempty"`
}

// ScheduledRun is a scheduled run as `inspect` reports it.
type ScheduledRun struct {
	Gen      uint64    `json:"gen"`
	Kind     string    `json:"kind"`
	State    string    `json:"state"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Operator string    `json:"operator"`
}

// String is the run as `inspect` prints it: "scheduled sync run gen 9
// failed (2026-12-07T05:10:00Z, schedule@m1): send: connection reset".
func (r ScheduledRun) String() string {
	s := fmt.Sprintf("scheduled %s run gen %d %s (%s, %s)", r.Kind, r.Gen, r.State, r.Started.UTC().Format(time.RFC3339), r.Operator)
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

// SnapshotsLine is the automatic snapshots as `inspect` prints them:
// "26 automatic snapshot(s), newest 2026-12-07T05:00:00Z"; "" when there
// are none.
func (p Protection) SnapshotsLine() string {
	if p.LastSnapshot == nil {
		return ""
	}
	return fmt.Sprintf("%d automatic snapshot(s), newest %s", p.SnapshotsKept, p.LastSnapshot.UTC().Format(time.RFC3339))
}

// NotDone is the newest scheduled run when it is not done (still open,
// or ended otherwise; nil when done or none): one that ended well shows
// as a Mirror's lag instead.
func (p Protection) NotDone() *ScheduledRun {
	if r := p.Scheduled; r != nil && r.State != operator.RunDone {
		return r
	}
	return nil
}

// Overdue reports whether the Mirror is more than twice every behind
// (every 0: no interval declared, never overdue): the Writer's Machine
// syncs it once it is every old, so twice that means the schedule is not
// keeping up.
func (l MirrorLag) Overdue(every time.Duration) bool {
	return every > 0 && time.Duration(l.BehindSeconds)*time.Second > 2*every
}

// MirrorLag is a Mirror's lag: Synced is when the newest run whose send
// landed on Machine started (its snapshot was taken after, so the Mirror
// is at most BehindSeconds behind).
type MirrorLag struct {
	Machine       string    `json:"machine"`
	Gen           uint64    `json:"gen"`
	Kind          string    `json:"kind"`
	Synced        time.Time `json:"synced"`
	BehindSeconds int64     `json:"behind_seconds"`
}

// String is the lag as `inspect` prints it: "Mirror on m2 is 12 min
// behind (sync run gen 7, 2026-12-07T05:10:00Z)".
func (l MirrorLag) String() string {
	return fmt.Sprintf("Mirror on %s is %s behind (%s run gen %d, %s)", l.Machine, behind(time.Duration(l.BehindSeconds)*time.Second), l.Kind, l.Gen, l.Synced.UTC().Format(time.RFC3339))
}

// behind is d in the largest whole unit that reads well.
func behind(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Hours()))
	}
	return fmt.Sprintf("%d days", int(d.Hours()/24))
}

// Protection reads the Cluster's runs of v (machine's copy) and answers
// its protection; only a Writer's copy reports Mirrors. When the runs
// cannot be read it answers the snapshots alone, with the error.
func (rn *Runner) Protection(ctx context.Context, machine string, v rpc.Volume) (Protection, error) {
	var runs []operator.VolumeRun
	var err error
	if v.Copy != nil && v.Copy.Role == volumecopy.Writer {
		runs, err = rn.Runs(ctx, v.Name, protectionRuns)
	}
	return ProtectionOf(machine, v, runs, time.Now()), err
}

// ProtectionOf is v's protection on machine at now, given the volume's
// runs newest first: each Machine a run's send step landed on (done or
// skipped: it held the snapshot), other than machine, is a Mirror at the
// newest such run.
func ProtectionOf(machine string, v rpc.Volume, runs []operator.VolumeRun, now time.Time) Protection {
	var p Protection
	for _, s := range v.Snapshots {
		if !volprotect.IsAuto(s.Name) {
			continue
		}
		p.SnapshotsKept++
		if t := time.Unix(0, s.Created).UTC(); p.LastSnapshot == nil || t.After(*p.LastSnapshot) {
			p.LastSnapshot = &t
		}
	}
	var rs []volprotect.Run
	for _, r := range runs {
		if p.Scheduled == nil && volprotect.IsScheduled(r.Operator) {
			p.Scheduled = &ScheduledRun{Gen: r.Gen, Kind: r.Kind, State: r.State, Error: r.Error, Started: r.Started.UTC(), Operator: r.Operator}
		}
		vr := volprotect.Run{Gen: r.Gen, Kind: r.Kind, State: r.State, Target: r.Target, Source: r.Source, Started: r.Started}
		for _, st := range r.Steps {
			vr.Steps = append(vr.Steps, volprotect.Step{Name: st.Name, Machine: st.Machine, Outcome: st.Outcome})
		}
		rs = append(rs, vr)
	}
	for _, l := range volprotect.Lags(machine, rs) {
		p.Mirrors = append(p.Mirrors, MirrorLag{Machine: l.Machine, Gen: l.Gen, Kind: l.Kind, Synced: l.Synced,
			BehindSeconds: int64(max(now.Sub(l.Synced), 0) / time.Second)})
	}
	return p
}
