package volprotect

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Extension is the compose key of a top-level volume declaring its
// Policy.
const Extension = "x-volume"

// Policy is a Provisioned Volume's x-volume: the automatic snapshots it
// keeps and the Mirror kept in Sync. The zero Policy protects nothing.
type Policy struct {
	Snapshots Retention `json:"snapshots"`
	Mirror    *Mirror   `json:"mirror,omitempty"`
}

// Retention is how many automatic snapshots are kept per bucket: the
// newest of each of the last Hourly hours, Daily days and Weekly ISO
// weeks that hold one (UTC).
type Retention struct {
	Hourly int `json:"hourly,omitempty"`
	Daily  int `json:"daily,omitempty"`
	Weekly int `json:"weekly,omitempty"`
}

// Any reports whether r keeps snapshots at all.
func (r Retention) Any() bool { return r.Hourly > 0 || r.Daily > 0 || r.Weekly > 0 }

// Mirror is where the volume's Mirror lives (a Machine by name, or the
// Machines matching every label) and how often it is brought level.
type Mirror struct {
	Machine string            `json:"machine,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Every is a Go duration ("15m"), at least MinMirrorEvery.
	Every string `json:"every"`
}

// MinMirrorEvery bounds how often a Sync may start: a run takes a lease
// and a snapshot, so a tighter loop would only queue runs.
const MinMirrorEvery = time.Minute

// Interval is m's Every as a duration (0 when it does not parse; Parse
// refuses that).
func (m Mirror) Interval() time.Duration {
	d, _ := time.ParseDuration(m.Every)
	return d
}

// Parse reads an x-volume value (compose's YAML as decoded: maps of
// string to any). Errors name the key under x-volume at fault.
func Parse(v any) (Policy, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Policy{}, fmt.Errorf("want a mapping with snapshots and mirror, got %T", v)
	}
	var p Policy
	for _, k := range sortedKeys(m) {
		var err error
		switch k {
		case "snapshots":
			p.Snapshots, err = parseRetention(m[k])
		case "mirror":
			p.Mirror, err = parseMirror(m[k])
		default:
			err = fmt.Errorf("unknown key (want snapshots, mirror)")
		}
		if err != nil {
			return Policy{}, fmt.Errorf("%s: %w", k, err)
		}
	}
	return p, p.Validate()
}

func parseRetention(v any) (Retention, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Retention{}, fmt.Errorf("want a mapping of hourly, daily, weekly counts, got %T", v)
	}
	var r Retention
	for _, k := range sortedKeys(m) {
		var dst *int
		switch k {
		case "hourly":
			dst = &r.Hourly
		case "daily":
			dst = &r.Daily
		case "weekly":
			dst = &r.Weekly
		default:
			return Retention{}, fmt.Errorf("%s: unknown key (want hourly, daily, weekly)", k)
		}
		n, ok := count(m[k])
		if !ok {
			return Retention{}, fmt.Errorf("%s: want a count, got %v", k, m[k])
		}
		*dst = n
	}
	return r, nil
}

func parseMirror(v any) (*Mirror, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a mapping with machine or labels, and every, got %T", v)
	}
	var out Mirror
	for _, k := range sortedKeys(m) {
		switch k {
		case "machine":
			s, ok := m[k].(string)
			if !ok {
				return nil, fmt.Errorf("machine: want a Machine name, got %v", m[k])
			}
			out.Machine = s
		case "labels":
			ls, ok := m[k].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("labels: want a mapping of label to value, got %v", m[k])
			}
			out.Labels = map[string]string{}
			for lk, lv := range ls {
				s, ok := lv.(string)
				if !ok {
					return nil, fmt.Errorf("labels.%s: want a string, got %v", lk, lv)
				}
				out.Labels[lk] = s
			}
		case "every":
			s, ok := m[k].(string)
			if !ok {
				return nil, fmt.Errorf("every: want a duration such as 15m, got %v", m[k])
			}
			out.Every = s
		default:
			return nil, fmt.Errorf("%s: unknown key (want machine, labels, every)", k)
		}
	}
	return &out, nil
}

// Validate refuses a Policy a reader could not act on, naming the key
// (also run on a stored Policy from a newer writer).
func (p Policy) Validate() error {
	for _, c := range []struct {
		key string
		n   int
	}{{"hourly", p.Snapshots.Hourly}, {"daily", p.Snapshots.Daily}, {"weekly", p.Snapshots.Weekly}} {
		if c.n < 0 {
			return fmt.Errorf("snapshots.%s: %d: want 0 or more", c.key, c.n)
		}
		if c.n > 1000 {
			return fmt.Errorf("snapshots.%s: %d: want at most 1000", c.key, c.n)
		}
	}
	if p.Mirror == nil {
		return nil
	}
	m := p.Mirror
	switch {
	case m.Machine == "" && len(m.Labels) == 0:
		return fmt.Errorf("mirror.machine: required (or mirror.labels): where the Mirror lives")
	case m.Machine != "" && len(m.Labels) > 0:
		return fmt.Errorf("mirror.labels: give mirror.machine or mirror.labels, not both")
	case m.Every == "":
		return fmt.Errorf("mirror.every: required: how often the Mirror is brought level (e.g. 15m)")
	}
	d, err := time.ParseDuration(m.Every)
	if err != nil {
		return fmt.Errorf("mirror.every: %q is not a duration (e.g. 15m, 1h)", m.Every)
	}
	if d < MinMirrorEvery {
		return fmt.Errorf("mirror.every: %s: want at least %s", m.Every, MinMirrorEvery)
	}
	return nil
}

// Selector is the Mirror's target as a sentence ("m2", "labels zone=b").
func (m Mirror) Selector() string {
	if m.Machine != "" {
		return m.Machine
	}
	var parts []string
	for _, k := range sortedKeys(m.Labels) {
		parts = append(parts, k+"="+m.Labels[k])
	}
	return "labels " + strings.Join(parts, ",")
}

// Matches reports whether a Machine of name and labels is the Mirror's.
func (m Mirror) Matches(name string, labels map[string]string) bool {
	if m.Machine != "" {
		return name == m.Machine
	}
	for k, v := range m.Labels {
		if labels[k] != v {
			return false
		}
	}
	return len(m.Labels) > 0
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// count is a YAML number as an int: decoders answer int, int64, uint64
// or a whole float64.
func count(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case uint64:
		return int(min(n, 1<<31)), true
	case float64:
		return int(n), n == float64(int(n))
	}
	return 0, false
}
