package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Concurrency policies.
const (
	ConcurrencyForbid = "forbid"
	ConcurrencyAllow  = "allow"
)

// Schedule is a job's x-schedule: a standard five-field cron expression
// (or a descriptor such as @daily), the IANA time zone it is read in
// ("" is UTC) and whether a tick may start while a previous run still
// runs.
type Schedule struct {
	Cron        string `json:"cron"`
	Timezone    string `json:"timezone,omitempty"`
	Concurrency string `json:"concurrency,omitempty"`
}

// parser reads the standard five fields and the @ descriptors; seconds
// and CRON_TZ= prefixes are not accepted (timezone is its own key).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseX reads an x-schedule value: a cron string, or a mapping {cron,
// timezone, concurrency}. Errors name the field under key.
func ParseX(key string, v any) (Schedule, error) {
	var s Schedule
	switch x := v.(type) {
	case string:
		s.Cron = x
	case map[string]any:
		b, err := json.Marshal(x)
		if err != nil {
			return s, fmt.Errorf("%s: %w", key, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return s, fmt.Errorf("%s: want {cron, timezone, concurrency}: %w", key, err)
		}
	default:
		return s, fmt.Errorf("%s: want a cron expression or {cron, timezone, concurrency}", key)
	}
	if s.Concurrency == "" {
		s.Concurrency = ConcurrencyForbid
	}
	cronKey := key
	if _, mapped := v.(map[string]any); mapped {
		cronKey = key + ".cron"
	}
	return s, s.validate(key, cronKey)
}

// Validate refuses an unparsable expression, an unknown time zone or
// concurrency, naming the field under key.
func (s Schedule) Validate(key string) error { return s.validate(key, key+".cron") }

func (s Schedule) validate(key, cronKey string) error {
	if strings.TrimSpace(s.Cron) == "" {
		return fmt.Errorf("%s: required (a cron expression such as \"0 3 * * *\")", cronKey)
	}
	if strings.HasPrefix(strings.TrimSpace(s.Cron), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(s.Cron), "TZ=") {
		return fmt.Errorf("%s: %q: give the time zone as %s.timezone", cronKey, s.Cron, key)
	}
	if strings.HasPrefix(strings.TrimSpace(s.Cron), "@every") {
		// Its ticks count from whenever a scheduler looks, so no two
		// Machines would agree on them.
		return fmt.Errorf("%s: %q: @every has no fixed ticks; write it as a cron expression (\"*/10 * * * *\")", cronKey, s.Cron)
	}
	if _, err := parser.Parse(s.Cron); err != nil {
		return fmt.Errorf("%s: %q: %w", cronKey, s.Cron, err)
	}
	if _, err := s.Location(); err != nil {
		return fmt.Errorf("%s.timezone: %q: unknown time zone", key, s.Timezone)
	}
	switch s.Concurrency {
	case ConcurrencyForbid, ConcurrencyAllow:
	default:
		return fmt.Errorf("%s.concurrency: %q is not forbid or allow", key, s.Concurrency)
	}
	return nil
}

// Location is the schedule's time zone.
func (s Schedule) Location() (*time.Location, error) {
	if s.Timezone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(s.Timezone)
}

// Ticks returns the schedule's ticks in (after, until], oldest first, at
// most max of the newest.
func (s Schedule) Ticks(after, until time.Time, max int) ([]time.Time, error) {
	sched, err := parser.Parse(s.Cron)
	if err != nil {
		return nil, err
	}
	loc, err := s.Location()
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for t := sched.Next(after.In(loc)); !t.After(until); t = sched.Next(t) {
		out = append(out, t.UTC())
		if len(out) > max {
			out = out[1:]
		}
	}
	return out, nil
}

// Next is the first tick after t (zero when the expression does not
// parse).
func (s Schedule) Next(t time.Time) time.Time {
	sched, err := parser.Parse(s.Cron)
	if err != nil {
		return time.Time{}
	}
	loc, err := s.Location()
	if err != nil {
		return time.Time{}
	}
	return sched.Next(t.In(loc)).UTC()
}
