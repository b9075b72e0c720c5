package volprotect

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeVolumes is a volume plugin's snapshots in memory.
type fakeVolumes struct {
	snaps map[string][]Snapshot
	now   *time.Time
	log   []string
}

func (f *fakeVolumes) Snapshots(_ context.Context, v string) ([]Snapshot, error) {
	return slices.Clone(f.snaps[v]), nil
}

func (f *fakeVolumes) Take(_ context.Context, v, name string) error {
	f.snaps[v] = append(f.snaps[v], Snapshot{Name: name, Created: *f.now})
	f.log = append(f.log, "take "+v+"@"+name)
	return nil
}

func (f *fakeVolumes) Destroy(_ context.Context, v, name string) error {
	f.snaps[v] = slices.DeleteFunc(f.snaps[v], func(s Snapshot) bool { return s.Name == name })
	f.log = append(f.log, "destroy "+v+"@"+name)
	return nil
}

// TestProtectorCompressedTime runs rounds every 10 minutes of a test
// clock over three days: hourly 24 and daily 3 leave 24 + 2 automatic
// snapshots (the newest day's is an hourly one), the operator's own
// snapshot stays, and a volume whose Writer is elsewhere is untouched.
func TestProtectorCompressedTime(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 5, 0, 0, time.UTC)
	fv := &fakeVolumes{snaps: map[string][]Snapshot{"db": {{Name: "before-upgrade", Created: now}}, "cache": nil}, now: &now}
	p := New(Config{
		Policies: func(context.Context) ([]Declared, error) {
			return []Declared{{Volume: "db", Policy: Policy{Snapshots: Retention{Hourly: 24, Daily: 3}}},
				{Volume: "cache", Policy: Policy{Snapshots: Retention{Hourly: 1}}}}, nil
		},
		IsWriter: func(v string) bool { return v == "db" },
		Volumes:  fv,
		Now:      func() time.Time { return now },
	})
	var next time.Time
	for end := now.Add(72 * time.Hour); now.Before(end); now = now.Add(10 * time.Minute) {
		var err error
		if next, err = p.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	takes := 0
	for _, l := range fv.log {
		if strings.HasPrefix(l, "take ") {
			takes++
		}
	}
	if takes != 72 {
		t.Errorf("took %d snapshots in 72 hours, want one an hour", takes)
	}
	got := fv.snaps["db"]
	if len(got) != 1+24+2 || got[0].Name != "before-upgrade" {
		t.Errorf("db keeps %d snapshots (%v), want before-upgrade and 26 automatic", len(got), got)
	}
	if len(fv.snaps["cache"]) != 0 {
		t.Errorf("a volume whose Writer is elsewhere got %v", fv.snaps["cache"])
	}
	if want := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("next %v, want %v", next, want)
	}
}
