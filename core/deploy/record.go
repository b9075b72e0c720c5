package deploy

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Record statuses beyond an Outcome's (completed, partial, cancelled) and
// a Machine's beyond a Step's (completed, failed, never_attempted).
const (
	RecordRunning = "running"
	// RecordCompleted is the Outcome's status when every step completed.
	RecordCompleted = "completed"
	MachinePending  = "pending" // planned, no step started yet
	MachineRunning  = "running" // a step is in flight
)

// Record is the operator's own account of one Deploy: what the deploying
// CLI saw while it ran and each Machine's outcome when it ended. It is
// bookkeeping on the operator's disk (like Saved State), never a Cluster
// view: a Machine's own Containers are the evidence of what reached it.
//
// The JSON body is a stable format: fields are only added, and readers
// ignore what they do not know (ParseRecord; testdata/record-v1.json).
type Record struct {
	DeploymentID string `json:"deployment_id"`
	Namespace    string `json:"namespace"`
	Project      string `json:"project"`
	Environment  string `json:"environment"`
	Revision     int    `json:"revision,omitempty"`
	// Why names a scale, restart or rm ("" for `ployz deploy`).
	Why string `json:"why,omitempty"`
	// Status is running while the CLI executes, then the Outcome's.
	Status     string    `json:"status"`
	StartedAt  time.Time `json:"started_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Machines are the plan's Machines in plan order.
	Machines []MachineRecord `json:"machines"`
	// Images are the image each declared Service ran, by Service name: a
	// rollback to this revision runs a build: Service's built tag from
	// here, since the revision keeps the compose file, not the build.
	Images map[string]string `json:"images,omitempty"`
	// Stale is set by a reader (never stored): the record says running
	// but the deploying CLI has not written it for StaleAfter.
	Stale bool `json:"stale,omitempty"`
}

// MachineRecord is one Machine's part of a Deploy.
type MachineRecord struct {
	MachineID string `json:"machine_id"`
	Machine   string `json:"machine"`
	// Status is pending, running, then completed, failed or
	// never_attempted (failed wins over never attempted).
	Status         string `json:"status"`
	Completed      int    `json:"completed"`
	Failed         int    `json:"failed"`
	NeverAttempted int    `json:"never_attempted"`
	// InFlight are the steps running now ("web create_container web-3").
	InFlight []string `json:"in_flight,omitempty"`
	// Last is the step that ended last; Error the first failure.
	Last  string `json:"last,omitempty"`
	Error string `json:"error,omitempty"`
}

// StaleAfter is how long a running record may go unwritten before a
// reader calls it stale; the deploying CLI rewrites it more often.
const StaleAfter = 30 * time.Second

// ParseRecord reads a stored record body, tolerating fields it does not
// know, and marks a running record not written for StaleAfter as stale.
func ParseRecord(b []byte, now time.Time) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("deploy record: %w", err)
	}
	r.Stale = r.Status == RecordRunning && now.Sub(r.UpdatedAt) > StaleAfter
	return r, nil
}

// Recorder turns an Executor's events into a Record as the Deploy runs;
// it is safe for the executor's goroutines and a writer at once.
type Recorder struct {
	mu       sync.Mutex
	rec      Record
	inflight map[string]map[string]string // machine id -> step key -> text
	dirty    bool
}

// NewRecorder starts a Record of p's execution: every Machine a row acts
// on is pending.
func NewRecorder(p Plan, why string, now time.Time) *Recorder {
	r := &Recorder{inflight: map[string]map[string]string{}, dirty: true}
	r.rec = Record{DeploymentID: p.DeploymentID, Namespace: p.Namespace, Project: p.Project, Environment: p.Environment,
		Revision: p.Revision, Why: why, Status: RecordRunning, StartedAt: now.UTC(), UpdatedAt: now.UTC()}
	for _, s := range p.Services {
		if s.Image == "" {
			continue
		}
		if r.rec.Images == nil {
			r.rec.Images = map[string]string{}
		}
		r.rec.Images[s.Name] = s.Image
	}
	for _, row := range p.Rows {
		if row.Op == OpUnchanged || row.Op == OpRetire || r.machine(row.MachineID, row.Machine) != nil {
			continue
		}
		r.rec.Machines = append(r.rec.Machines, MachineRecord{MachineID: row.MachineID, Machine: row.Machine, Status: MachinePending})
	}
	return r
}

func (r *Recorder) machine(id, name string) *MachineRecord {
	for i := range r.rec.Machines {
		if r.rec.Machines[i].MachineID == id {
			return &r.rec.Machines[i]
		}
	}
	return nil
}

// Event records one executor event; it is an Executor.Progress.
func (r *Recorder) Event(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := e.Step
	m := r.machine(s.MachineID, s.Machine)
	if m == nil {
		r.rec.Machines = append(r.rec.Machines, MachineRecord{MachineID: s.MachineID, Machine: s.Machine, Status: MachinePending})
		m = &r.rec.Machines[len(r.rec.Machines)-1]
	}
	key := fmt.Sprintf("%d/%s/%s/%t", s.Row, s.Action, s.Container, s.Compensation)
	text := s.Service + " " + s.Action + " " + s.Container
	fl := r.inflight[s.MachineID]
	if fl == nil {
		fl = map[string]string{}
		r.inflight[s.MachineID] = fl
	}
	switch {
	case e.Pull != nil:
		fl[key] = fmt.Sprintf("%s (%.1f of %.1f MB)", text, float64(e.Pull.Bytes)/1e6, float64(e.Pull.Total)/1e6)
	case !e.Done:
		fl[key] = text
	default:
		delete(fl, key)
		countStep(m, s)
		m.Last = text + ": " + s.Status
	}
	m.InFlight = sortedValues(fl)
	m.Status = machineStatus(*m)
	r.dirty = true
}

func countStep(m *MachineRecord, s Step) {
	switch s.Status {
	case StepCompleted:
		m.Completed++
	case StepFailed:
		m.Failed++
		if m.Error == "" {
			m.Error = s.Service + " " + s.Action + " " + s.Container + ": " + s.Error
		}
	case StepNeverAttempted:
		m.NeverAttempted++
	}
}

// machineStatus is a Machine's status from its counts: in flight, then
// failed, never attempted, completed, else still pending.
func machineStatus(m MachineRecord) string {
	switch {
	case len(m.InFlight) > 0:
		return MachineRunning
	case m.Failed > 0:
		return StepFailed
	case m.NeverAttempted > 0:
		return StepNeverAttempted
	case m.Completed > 0:
		return StepCompleted
	}
	return MachinePending
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Finish records the Outcome: each Machine's counts and status are
// recomputed from its steps (never-attempted steps emit no event), and a
// Machine no step reached is never attempted.
func (r *Recorder) Finish(o Outcome, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.rec.Machines {
		m := &r.rec.Machines[i]
		*m = MachineRecord{MachineID: m.MachineID, Machine: m.Machine, Last: m.Last}
	}
	for _, s := range o.Steps {
		m := r.machine(s.MachineID, s.Machine)
		if m == nil {
			r.rec.Machines = append(r.rec.Machines, MachineRecord{MachineID: s.MachineID, Machine: s.Machine})
			m = &r.rec.Machines[len(r.rec.Machines)-1]
		}
		countStep(m, s)
	}
	for i := range r.rec.Machines {
		m := &r.rec.Machines[i]
		if m.Status = machineStatus(*m); m.Status == MachinePending {
			m.Status = StepNeverAttempted
		}
	}
	r.rec.Status = o.Status
	r.rec.FinishedAt = now.UTC()
	r.rec.UpdatedAt = now.UTC()
	r.dirty = true
}

// Take returns the Record and whether it changed since the last Take;
// UpdatedAt is set to now (a running record's heartbeat).
func (r *Recorder) Take(now time.Time) (Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rec.Status == RecordRunning {
		r.rec.UpdatedAt = now.UTC()
	}
	rec := r.rec
	rec.Machines = append([]MachineRecord(nil), r.rec.Machines...)
	changed := r.dirty
	r.dirty = false
	return rec, changed
}

// LastOutcome is a Machine's outcome in the newest Deploy of a namespace
// that acted on it.
type LastOutcome struct {
	Namespace    string    `json:"namespace"`
	Machine      string    `json:"machine"`
	MachineID    string    `json:"machine_id"`
	Status       string    `json:"status"`
	DeploymentID string    `json:"deployment_id"`
	Revision     int       `json:"revision,omitempty"`
	At           time.Time `json:"at"`
	Error        string    `json:"error,omitempty"`
}

// LastOutcomes folds records (any order) into each namespace's Machines'
// newest outcome, sorted by namespace and Machine.
func LastOutcomes(recs []Record) []LastOutcome {
	sorted := append([]Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].StartedAt.After(sorted[j].StartedAt) })
	seen := map[string]bool{}
	var out []LastOutcome
	for _, r := range sorted {
		for _, m := range r.Machines {
			k := r.Namespace + "\x00" + m.MachineID
			if seen[k] {
				continue
			}
			seen[k] = true
			st := m.Status
			if r.Stale && (st == MachineRunning || st == MachinePending) {
				st = "unknown"
			}
			out = append(out, LastOutcome{Namespace: r.Namespace, Machine: m.Machine, MachineID: m.MachineID, Status: st,
				DeploymentID: r.DeploymentID, Revision: r.Revision, At: r.UpdatedAt, Error: m.Error})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Namespace < out[j].Namespace || out[i].Namespace == out[j].Namespace && out[i].Machine < out[j].Machine
	})
	return out
}
