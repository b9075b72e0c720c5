package volprotect

import "time"

// Run is what the lag reads of a Volume Run record (core/operator's
// VolumeRun JSON, as the volume_runs table keeps it: a reader that does
// not link the operator store decodes only these fields).
type Run struct {
	Gen     uint64    `json:"gen"`
	Kind    string    `json:"kind"`
	State   string    `json:"state"`
	Target  string    `json:"target,omitempty"`
	Source  string    `json:"source,omitempty"`
	Started time.Time `json:"started_at"`
	Steps   []Step    `json:"steps"`
}

// Step is one step of a Run: a send step's Machine is its target.
type Step struct {
	Name    string `json:"name"`
	Machine string `json:"machine,omitempty"`
	Outcome string `json:"outcome"`
}

// Lag is a Mirror's last sync: Synced is when the newest run whose
// stream landed on Machine started (its snapshot was taken after, so
// the Mirror is at most now - Synced behind).
type Lag struct {
	Machine string
	Gen     uint64
	Kind    string
	Synced  time.Time
}

// Lags are the Mirrors of writer's volume as its runs (newest first)
// show them: each Machine a send step landed on (done, or skipped
// because it held the snapshot), at the newest such run; a Move's
// source, level at its cut; never a Machine a later Delete Mirror
// emptied, nor writer itself.
func Lags(writer string, runs []Run) []Lag {
	var out []Lag
	seen := map[string]bool{writer: true}
	for _, r := range runs {
		switch {
		case r.State == "done" && r.Kind == "delete-mirror":
			seen[r.Target] = true // no Mirror there since
		case r.State == "done" && r.Kind == "move" && r.Source != "" && !seen[r.Source]:
			seen[r.Source] = true
			out = append(out, Lag{Machine: r.Source, Gen: r.Gen, Kind: r.Kind, Synced: r.Started.UTC()})
		}
		for _, st := range r.Steps {
			if st.Name != "send" || seen[st.Machine] || (st.Outcome != "done" && st.Outcome != "skipped") {
				continue
			}
			seen[st.Machine] = true
			out = append(out, Lag{Machine: st.Machine, Gen: r.Gen, Kind: r.Kind, Synced: r.Started.UTC()})
		}
	}
	return out
}
