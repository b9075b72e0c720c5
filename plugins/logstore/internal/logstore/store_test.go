package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/plugins/logstore/internal/dockerlog"
	"github.com/ployz/ployz/sdk/observe"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func lines(start time.Time, step time.Duration, n int, prefix string) []dockerlog.Line {
	out := make([]dockerlog.Line, n)
	for i := range out {
		out[i] = dockerlog.Line{Source: "stdout", TimeNano: start.Add(time.Duration(i) * step).UnixNano(), Text: []byte(fmt.Sprintf("%s %d", prefix, i))}
	}
	return out
}

func texts(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, string(h.Line))
	}
	return out
}

func TestStoreQueriesBySelectorTimeAndGrep(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := Container{ID: "aaaa1111", Name: "web-1", Namespace: "p-prod", Service: "web", Deployment: "dep1"}
	b := Container{ID: "bbbb2222", Name: "web-2", Namespace: "p-prod", Service: "web", Deployment: "dep2"}
	db := Container{ID: "cccc3333", Name: "db-1", Namespace: "p-prod", Service: "db", Deployment: "dep1"}
	s.Append(a, lines(t0, time.Minute, 90, "a")) // crosses an hour
	s.Append(b, lines(t0.Add(30*time.Second), time.Minute, 3, "b"))
	s.Append(db, lines(t0, time.Minute, 3, "db"))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Reopened, as after a plugin restart.
	s, err = Open(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Query(Query{Sel: Selector{Service: "web"}, From: t0.UnixNano(), To: t0.Add(2 * time.Minute).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(res.Hits), ","); got != "a 0,b 0,a 1,b 1,a 2" {
		t.Fatalf("web 0-2m = %s", got)
	}
	res, _ = s.Query(Query{Sel: Selector{Deployment: "dep1"}, Limit: 2})
	if got := strings.Join(texts(res.Hits), ","); got != "a 0,db 0" || !res.Truncated {
		t.Fatalf("dep1 first 2 = %s truncated %v", got, res.Truncated)
	}
	res, _ = s.Query(Query{Sel: Selector{Container: "web-1"}, Limit: 3, Newest: true})
	if got := strings.Join(texts(res.Hits), ","); got != "a 87,a 88,a 89" {
		t.Fatalf("web-1 last 3 = %s", got)
	}
	res, _ = s.Query(Query{Sel: Selector{Container: "aaaa"}, Grep: regexp.MustCompile(`^a 8[0-2]$`)})
	if got := strings.Join(texts(res.Hits), ","); got != "a 80,a 81,a 82" {
		t.Fatalf("grep = %s", got)
	}
	if hs, _ := os.ReadDir(filepath.Join(s.Dir(), "hours")); len(hs) != 2 {
		t.Fatalf("%d hour directories, want 2", len(hs))
	}
}

func TestStoreKeepsOutputOfRemovedContainer(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := Container{ID: "dddd4444", Name: "old", Service: "web"}
	s.Append(c, lines(t0, time.Second, 2, "old"))
	s.MarkRemoved(c.ID, t0.Add(time.Minute))
	res, _ := s.Query(Query{Sel: Selector{Service: "web"}})
	if len(res.Hits) != 2 || res.Hits[0].Container.Removed == 0 {
		t.Fatalf("hits %+v", res.Hits)
	}
}

func TestUnknownFormatIsDeleted(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("ployz-logstore 99\n"), 0o600)
	os.MkdirAll(filepath.Join(dir, "hours", "2026120110"), 0o700)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if hs, _ := s.hours(); len(hs) != 0 {
		t.Fatalf("hours kept from an unknown format: %v", hs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "FORMAT")); strings.TrimSpace(string(b)) != FormatVersion {
		t.Fatalf("FORMAT = %q", b)
	}
}

// TestRetentionBySizeThenAgeOldestHourFirst drives retention with a fake
// clock: the size cap deletes the oldest hours first and a query over
// them names the gap; the age cap then deletes what grew old.
func TestRetentionBySizeThenAgeOldestHourFirst(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := Container{ID: "eeee5555", Name: "w", Service: "web"}
	for h := 0; h < 4; h++ {
		s.Append(c, lines(t0.Add(time.Duration(h)*time.Hour), time.Second, 100, fmt.Sprintf("h%d", h)))
	}
	s.Flush()
	hourSize := obsfs.Size(filepath.Join(s.Dir(), "hours", "2026120110"))
	budget := observe.Budget{MaxBytes: 3 * hourSize, MaxAgeSeconds: int64((24 * time.Hour).Seconds())}
	now := t0.Add(4 * time.Hour)
	ev, err := s.Enforce(now, budget, Usage{Free: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev) != 2 || ev[0].Hour != "2026120110" || ev[1].Hour != "2026120111" || ev[0].Reason != "size cap" {
		t.Fatalf("evictions %+v", ev)
	}
	res, _ := s.Query(Query{From: t0.UnixNano()})
	if len(res.Hits) != 200 || !strings.HasPrefix(string(res.Hits[0].Line), "h2 ") {
		t.Fatalf("%d hits from %q", len(res.Hits), res.Hits[0].Line)
	}
	if len(res.Gaps) != 1 || res.Gaps[0].To != t0.Add(2*time.Hour).UnixNano() || !strings.Contains(res.Gaps[0].Reason, "size cap") {
		t.Fatalf("gaps %+v", res.Gaps)
	}
	// The rest of the Observe Store counts against the same budget.
	ev, _ = s.Enforce(now, budget, Usage{Others: hourSize, Free: -1})
	if len(ev) != 1 || ev[0].Hour != "2026120112" {
		t.Fatalf("shared budget evictions %+v", ev)
	}
	// A day later, the last hour is past the age cap.
	ev, _ = s.Enforce(now.Add(24*time.Hour), budget, Usage{Free: -1})
	if len(ev) != 1 || ev[0].Reason != "age cap" {
		t.Fatalf("age evictions %+v", ev)
	}
	if cs := s.Containers(); len(cs) != 0 {
		t.Fatalf("catalog keeps %+v after all its lines were deleted", cs)
	}
}

func TestRetentionFreeFloor(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := Container{ID: "ffff6666", Name: "w"}
	s.Append(c, lines(t0, time.Second, 10, "x"))
	s.Append(c, lines(t0.Add(time.Hour), time.Second, 10, "y"))
	ev, _ := s.Enforce(t0.Add(2*time.Hour), observe.Budget{MinFreeBytes: 1 << 30}, Usage{Free: 1<<30 - 10})
	if len(ev) != 1 || ev[0].Reason != "disk free floor" || ev[0].Hour != "2026120110" {
		t.Fatalf("evictions %+v", ev)
	}
}
