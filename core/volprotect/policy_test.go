package volprotect

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	p, err := Parse(map[string]any{
		"snapshots": map[string]any{"hourly": 24, "daily": int64(7), "weekly": float64(4)},
		"mirror":    map[string]any{"machine": "m2", "every": "15m"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Snapshots != (Retention{Hourly: 24, Daily: 7, Weekly: 4}) || p.Mirror.Machine != "m2" || p.Mirror.Interval().Minutes() != 15 {
		t.Fatalf("parsed %+v %+v", p, p.Mirror)
	}
	p, err = Parse(map[string]any{"mirror": map[string]any{"labels": map[string]any{"zone": "b"}, "every": "1h"}})
	if err != nil || p.Mirror.Selector() != "labels zone=b" || !p.Mirror.Matches("m3", map[string]string{"zone": "b"}) || p.Mirror.Matches("m1", nil) {
		t.Fatalf("labels: %+v %v", p.Mirror, err)
	}
}

// TestParseRefused: each bad value is refused naming its key.
func TestParseRefused(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{"daily", "want a mapping"},
		{map[string]any{"snapshot": map[string]any{}}, "snapshot: unknown key"},
		{map[string]any{"snapshots": map[string]any{"hourly": -1}}, "snapshots.hourly: -1: want 0 or more"},
		{map[string]any{"snapshots": map[string]any{"monthly": 3}}, "snapshots: monthly: unknown key"},
		{map[string]any{"snapshots": map[string]any{"daily": "seven"}}, "snapshots: daily: want a count"},
		{map[string]any{"snapshots": map[string]any{"daily": 1.5}}, "snapshots: daily: want a count"},
		{map[string]any{"mirror": map[string]any{"machine": "m2", "every": "15 minutes"}}, `mirror.every: "15 minutes" is not a duration`},
		{map[string]any{"mirror": map[string]any{"machine": "m2", "every": "10s"}}, "mirror.every: 10s: want at least 1m0s"},
		{map[string]any{"mirror": map[string]any{"machine": "m2"}}, "mirror.every: required"},
		{map[string]any{"mirror": map[string]any{"every": "15m"}}, "mirror.machine: required"},
		{map[string]any{"mirror": map[string]any{"machine": "m2", "labels": map[string]any{"a": "b"}, "every": "15m"}}, "mirror.labels: give mirror.machine or mirror.labels, not both"},
		{map[string]any{"mirror": map[string]any{"machine": "m2", "every": "15m", "on": "x"}}, "mirror: on: unknown key"},
	} {
		_, err := Parse(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%v) = %v, want %q", c.in, err, c.want)
		}
	}
}
