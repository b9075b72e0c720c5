package jobs

import (
	"strings"
	"testing"
	"time"
)

func TestParseX(t *testing.T) {
	s, err := ParseX("x-schedule", "*/15 * * * *")
	if err != nil || s.Cron != "*/15 * * * *" || s.Concurrency != ConcurrencyForbid || s.Timezone != "" {
		t.Fatalf("string form = %+v, %v", s, err)
	}
	s, err = ParseX("x-schedule", map[string]any{"cron": "@daily", "timezone": "Europe/Paris", "concurrency": "allow"})
	if err != nil || s.Cron != "@daily" || s.Timezone != "Europe/Paris" || s.Concurrency != ConcurrencyAllow {
		t.Fatalf("mapping form = %+v, %v", s, err)
	}
	bad := map[string]struct {
		v    any
		want string
	}{
		"bad cron":        {"61 * * * *", `x-schedule: "61 * * * *"`},
		"seconds field":   {"0 0 3 * * *", `x-schedule: "0 0 3 * * *"`},
		"empty":           {"", `x-schedule: required`},
		"mapped bad cron": {map[string]any{"cron": "nope"}, `x-schedule.cron: "nope"`},
		"timezone":        {map[string]any{"cron": "@hourly", "timezone": "Mars/Olympus"}, `x-schedule.timezone: "Mars/Olympus": unknown time zone`},
		"concurrency":     {map[string]any{"cron": "@hourly", "concurrency": "replace"}, `x-schedule.concurrency: "replace"`},
		"unknown key":     {map[string]any{"cron": "@hourly", "tz": "UTC"}, `unknown field "tz"`},
		"cron tz prefix":  {"CRON_TZ=UTC 0 3 * * *", `x-schedule.timezone`},
		"every":           {"@every 10m", `@every has no fixed ticks`},
		"not a string":    {3, `want a cron expression`},
	}
	for name, c := range bad {
		if _, err := ParseX("x-schedule", c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
}

func TestTicksInZone(t *testing.T) {
	s := Schedule{Cron: "0 3 * * *", Timezone: "Europe/Paris", Concurrency: ConcurrencyForbid}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ticks, err := s.Ticks(from, from.Add(72*time.Hour), 2)
	if err != nil || len(ticks) != 2 {
		t.Fatalf("ticks = %v, %v", ticks, err)
	}
	// 03:00 in Paris in winter is 02:00 UTC; the two newest of three days.
	if want := time.Date(2026, 1, 2, 2, 0, 0, 0, time.UTC); !ticks[0].Equal(want) {
		t.Fatalf("first kept tick = %v, want %v", ticks[0], want)
	}
	if n := s.Next(from); !n.Equal(time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("next = %v", n)
	}
}
