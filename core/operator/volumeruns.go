package operator

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Volume Run outcomes (design: a run ends done, failed, cancelled or
// lost, and never runs again on its own). A step ends done, failed,
// cancelled or skipped (what the disks showed was already there).
const (
	RunOpen      = "open"
	RunDone      = "done"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	RunLost      = "lost"
	// RunUndone is a Move that failed before its point of no return and
	// put the source back: its Writer and Containers as they were.
	RunUndone   = "undone"
	StepSkipped = "skipped"
)

// VolumeRun is the operators' record of one Volume Run, numbered by Gen:
// kept in the Cluster (volume_runs, this JSON inside the row's body), or
// by this store against an entry that keeps none (the functions below).
// It is bookkeeping, never the Cluster's truth about copies: every step
// is admitted by the Machine it touches against its own copy. The JSON
// names are frozen; fields are only added.
type VolumeRun struct {
	Context string    `json:"context"`
	Volume  string    `json:"volume"`
	Gen     uint64    `json:"gen"`
	Kind    string    `json:"kind"` // mirror, sync, move, release, delete-mirror, restore, snapshot-restore
	Target  string    `json:"target,omitempty"`
	State   string    `json:"state"`
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started_at"`
	Updated time.Time `json:"updated_at"`
	// Host and Pid are the CLI process driving an open run: a run whose
	// process is gone is lost, and the next run on the Volume may start.
	Host  string    `json:"host,omitempty"`
	Pid   int       `json:"pid,omitempty"`
	Steps []RunStep `json:"steps"`
	// DowntimeSeconds is a Move's cut: the first Container stopped on
	// the source until the last one was ready on the target.
	DowntimeSeconds float64 `json:"downtime_seconds,omitempty"`
	// Source is a Move's source Machine (the Writer it started from), or
	// the Writer a Release demotes.
	Source string `json:"source,omitempty"`
	// Stopped names the source Containers a Move's or a Release's cut
	// stopped: for a Move the ones to run again on the target.
	Stopped []string `json:"stopped,omitempty"`
	// Finishes is the gen of the Move this run finishes (one that failed
	// after its point of no return): its creation keys are that gen's.
	Finishes uint64 `json:"finishes,omitempty"`
	// Operator names who drove the run (the Cluster's record of it; a
	// run only this computer's store kept names none).
	Operator string `json:"operator,omitempty"`
}

// RunStep is one step's outcome.
type RunStep struct {
	Name    string  `json:"name"`
	Machine string  `json:"machine,omitempty"`
	Outcome string  `json:"outcome"` // done, failed, cancelled, skipped
	Detail  string  `json:"detail,omitempty"`
	Error   string  `json:"error,omitempty"`
	Bytes   uint64  `json:"bytes,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
}

// ErrRunOpen is returned (wrapped, with the run) when a Volume already
// has an open run driven by a live process.
var ErrRunOpen = errors.New("volume run open")

// RunOpenError names the open run that refused a new one.
type RunOpenError struct{ Run VolumeRun }

func (e *RunOpenError) Error() string {
	return fmt.Sprintf("volume %s has an open %s run (gen %d, started %s by pid %d on %s): one run per Volume",
		e.Run.Volume, e.Run.Kind, e.Run.Gen, e.Run.Started.UTC().Format(time.RFC3339), e.Run.Pid, e.Run.Host)
}

func (e *RunOpenError) Unwrap() error { return ErrRunOpen }

const volumeRunsSchema = `
CREATE TABLE IF NOT EXISTS volume_runs (
  context TEXT NOT NULL,
  volume  TEXT NOT NULL,
  gen     INTEGER NOT NULL,
  state   TEXT NOT NULL,
  body    BLOB NOT NULL,
  PRIMARY KEY (context, volume, gen)
);
`

func (s *Store) ensureVolumeRuns() error { return s.ensureSchema("volume runs", volumeRunsSchema) }

// alive reports whether an open run's process still runs (on this host;
// a run opened on another host is taken as alive).
var alive = func(host string, pid int) bool {
	if h, _ := os.Hostname(); h != host {
		return true
	}
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

// BeginVolumeRun opens a run on a Volume with the next gen of this
// store (an entry that keeps no runs: core/volumerun's book), refusing
// (RunOpenError) while another open run's process is alive; an open run
// whose process is gone is marked lost first.
func (s *Store) BeginVolumeRun(context, volume, kind, target string, now time.Time) (VolumeRun, error) {
	return s.BeginVolumeRunAbove(context, volume, kind, target, 0, now)
}

// BeginVolumeRunAbove is BeginVolumeRun with a gen above floor too: the
// highest floor the run's Machines reported. Runs another operator
// computer drove raised those floors past this store's own gens, and a
// run below them would see every step refused as a late one.
func (s *Store) BeginVolumeRunAbove(context, volume, kind, target string, floor uint64, now time.Time) (VolumeRun, error) {
	if err := s.ensureVolumeRuns(); err != nil {
		return VolumeRun{}, err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return VolumeRun{}, fmt.Errorf("begin volume run: %w", err)
	}
	defer tx.Rollback() // after Commit it is a no-op
	rows, err := tx.Query(`SELECT body FROM volume_runs WHERE context = ? AND volume = ? AND state = ?`, context, volume, RunOpen)
	if err != nil {
		return VolumeRun{}, fmt.Errorf("begin volume run: %w", err)
	}
	var open []VolumeRun
	for rows.Next() {
		var b []byte
		var r VolumeRun
		if err := rows.Scan(&b); err == nil && json.Unmarshal(b, &r) == nil {
			open = append(open, r)
		}
	}
	rows.Close()
	for _, r := range open {
		if alive(r.Host, r.Pid) {
			return VolumeRun{}, &RunOpenError{Run: r}
		}
		r.State, r.Updated = RunLost, now
		r.Error = "its CLI process ended without finishing it"
		if err := putRun(tx, r); err != nil {
			return VolumeRun{}, err
		}
	}
	var last sql.NullInt64
	if err := tx.QueryRow(`SELECT MAX(gen) FROM volume_runs WHERE context = ? AND volume = ?`, context, volume).Scan(&last); err != nil {
		return VolumeRun{}, fmt.Errorf("begin volume run: %w", err)
	}
	host, _ := os.Hostname()
	r := VolumeRun{Context: context, Volume: volume, Gen: max(uint64(last.Int64), floor) + 1, Kind: kind, Target: target, State: RunOpen,
		Started: now, Updated: now, Host: host, Pid: os.Getpid(), Steps: []RunStep{}}
	if err := putRun(tx, r); err != nil {
		return VolumeRun{}, err
	}
	if err := tx.Commit(); err != nil {
		return VolumeRun{}, fmt.Errorf("begin volume run: %w", err)
	}
	return r, nil
}

// SaveVolumeRun rewrites a run's record (its steps, its end).
func (s *Store) SaveVolumeRun(r VolumeRun) error {
	if err := s.ensureVolumeRuns(); err != nil {
		return err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit it is a no-op
	if err := putRun(tx, r); err != nil {
		return err
	}
	return tx.Commit()
}

func putRun(tx *sql.Tx, r VolumeRun) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(`INSERT INTO volume_runs(context, volume, gen, state, body) VALUES(?, ?, ?, ?, ?)
		ON CONFLICT(context, volume, gen) DO UPDATE SET state = excluded.state, body = excluded.body`,
		r.Context, r.Volume, r.Gen, r.State, b); err != nil {
		return fmt.Errorf("record volume run %s gen %d: %w", r.Volume, r.Gen, err)
	}
	return nil
}

// LastVolumeRun is a volume's newest run of kind (false when there is
// none). An open run whose process is gone is answered lost, as the next
// BeginVolumeRun will record it.
func (s *Store) LastVolumeRun(context, volume, kind string) (VolumeRun, bool, error) {
	if err := s.ensureVolumeRuns(); err != nil {
		return VolumeRun{}, false, err
	}
	var b []byte
	err := s.db.QueryRow(`SELECT body FROM volume_runs WHERE context = ? AND volume = ? AND json_extract(body, '$.kind') = ? ORDER BY gen DESC LIMIT 1`,
		context, volume, kind).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return VolumeRun{}, false, nil
	}
	if err != nil {
		return VolumeRun{}, false, fmt.Errorf("last %s run of %s: %w", kind, volume, err)
	}
	var r VolumeRun
	if err := json.Unmarshal(b, &r); err != nil {
		return VolumeRun{}, false, fmt.Errorf("last %s run of %s: malformed record: %w", kind, volume, err)
	}
	if r.State == RunOpen && !alive(r.Host, r.Pid) {
		r.State = RunLost
	}
	return r, true, nil
}

// VolumeRuns are a context's runs (of one volume, or all when volume is
// empty), newest first, at most limit.
func (s *Store) VolumeRuns(context, volume string, limit int) ([]VolumeRun, error) {
	if err := s.ensureVolumeRuns(); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(`SELECT body FROM volume_runs WHERE context = ? AND (? = '' OR volume = ?) ORDER BY json_extract(body, '$.started_at') DESC, gen DESC LIMIT ?`,
		context, volume, volume, limit)
	if err != nil {
		return nil, fmt.Errorf("volume runs: %w", err)
	}
	defer rows.Close()
	var out []VolumeRun
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("volume runs: %w", err)
		}
		var r VolumeRun
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("volume runs: malformed record: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
