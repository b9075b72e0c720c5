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
	out := &Outcomes{}
	fv := &fakeVolumes{snaps: map[string][]Snapshot{"db": {{Name: "before-upgrade", Created: now}}, "cache": nil}, now: &now}
	p := New(Config{
		Policies: func(context.Context) ([]Declared, error) {
			return []Declared{{Volume: "db", Policy: Policy{Snapshots: Retention{Hourly: 24, Daily: 3}}},
				{Volume: "cache", Policy: Policy{Snapshots: Retention{Hourly: 1}}}}, nil
		},
		IsWriter: func(v string) bool { return v == "db" },
		Volumes:  fv,
		Lags: func(context.Context, string) ([]Lag, error) {
			return []Lag{{Machine: "m2", Gen: 7, Kind: "sync", Synced: time.Date(2026, 12, 3, 23, 40, 0, 0, time.UTC)}}, nil
		},
		Outcomes: out,
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
	m := out.Snapshot()
	if len(m) != 1 || m[0].Volume != "db" || m[0].Snapshots[ResultTaken] != 72 || m[0].Snapshots[ResultPruned] != 72-26 ||
		m[0].LastSnapshot != time.Date(2026, 12, 3, 23, 5, 0, 0, time.UTC).UnixMilli() || len(m[0].Mirrors) != 1 || m[0].Mirrors[0].Machine != "m2" {
		t.Errorf("outcomes %+v", m)
	}
}

// TestLags: each Mirror's last sync is the newest run whose send landed
// there; a failed send does not count, a skipped one does; a Mirror a
// later Delete Mirror emptied is not one; a Move's source is, at the cut.
func TestLags(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 12, 7, 5, min, 0, 0, time.UTC) }
	send := func(m, outcome string) Step { return Step{Name: "send", Machine: m, Outcome: outcome} }
	runs := []Run{
		{Gen: 9, Kind: "sync", State: "failed", Started: at(50), Steps: []Step{send("m2", "failed"), send("m3", "done")}},
		{Gen: 8, Kind: "delete-mirror", State: "done", Target: "m4", Started: at(40)},
		{Gen: 7, Kind: "sync", State: "done", Started: at(30), Steps: []Step{send("m2", "skipped"), send("m4", "done")}},
		{Gen: 6, Kind: "move", State: "done", Source: "m5", Target: "m1", Started: at(20), Steps: []Step{send("m1", "done")}},
	}
	got := Lags("m1", runs)
	want := []Lag{{Machine: "m3", Gen: 9, Kind: "sync", Synced: at(50)}, {Machine: "m2", Gen: 7, Kind: "sync", Synced: at(30)}, {Machine: "m5", Gen: 6, Kind: "move", Synced: at(20)}}
	if !slices.Equal(got, want) {
		t.Fatalf("lags %+v, want %+v", got, want)
	}
}
