package metrics

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"

	"github.com/ployz/ployz/plugins/internal/obsfs"
)

// Marker kinds.
const (
	MarkStart   = "start"
	MarkStop    = "stop"
	MarkOOMKill = "oom_kill"
	MarkRestart = "restart"
	MarkDeploy  = "deploy"
)

// Marker is a lifecycle event on the metrics timeline.
type Marker struct {
	T       int64   `json:"t"`
	Subject Subject `json:"s"`
	Kind    string  `json:"k"`
	Detail  string  `json:"d,omitempty"`
}

// lifecycle is what the collector remembers of a Container's state to
// notice changes, from Docker's own config.v2.json (file reads only).
type lifecycle struct {
	running   bool
	startedAt string
	restarts  int
}

// markers compares a Container's state with the last one seen and returns
// the events between them; first says the Container is new to the
// collector (its start is a marker only if it started since the last
// tick, which the caller knows from StartedAt).
func markers(now int64, s Subject, prev lifecycle, had bool, cur lifecycle, oom bool, exit int, deployNew bool) []Marker {
	var out []Marker
	add := func(kind, detail string) { out = append(out, Marker{T: now, Subject: s, Kind: kind, Detail: detail}) }
	if deployNew {
		add(MarkDeploy, s.Deployment)
	}
	switch {
	case !had && cur.running:
		add(MarkStart, cur.startedAt)
	case had && cur.restarts > prev.restarts:
		add(MarkRestart, cur.startedAt)
	case had && !prev.running && cur.running:
		add(MarkStart, cur.startedAt)
	case had && prev.running && cur.running && cur.startedAt != prev.startedAt:
		add(MarkRestart, cur.startedAt)
	}
	if had && prev.running && !cur.running {
		if oom {
			add(MarkOOMKill, "")
		} else {
			add(MarkStop, exitDetail(exit))
		}
	}
	return out
}

func exitDetail(code int) string {
	b, _ := json.Marshal(map[string]int{"exit_code": code})
	return string(b)
}

// writeMarkers appends markers to markers.jsonl.
func (s *Store) writeMarkers(ms []Marker) error {
	if len(ms) == 0 {
		return nil
	}
	var b []byte
	for _, m := range ms {
		j, _ := json.Marshal(m)
		b = append(append(b, j...), '\n')
	}
	return obsfs.AppendFile(filepath.Join(s.dir, "markers.jsonl"), b)
}

// markersIn returns the markers in [from, to] whose subject members (or
// the Machine query, which gets all) selects.
func (s *Store) markersIn(from, to int64, match func(Subject) bool) []Marker {
	f, err := os.Open(filepath.Join(s.dir, "markers.jsonl"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Marker
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m Marker
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.T < from || m.T > to || !match(m.Subject) {
			continue
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}
