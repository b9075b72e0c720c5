package logstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/plugins/logstore/internal/dockerlog"
	"github.com/ployz/ployz/sdk/observe"
)

// floodLines are n lines of about 200 bytes from start, step apart.
func floodLines(start time.Time, step time.Duration, from, n int) []dockerlog.Line {
	out := make([]dockerlog.Line, n)
	pad := strings.Repeat("x", 180)
	for i := range out {
		out[i] = dockerlog.Line{Source: "stdout", TimeNano: start.Add(time.Duration(from+i) * step).UnixNano(),
			Text: []byte(fmt.Sprintf("flood %07d %s", from+i, pad))}
	}
	return out
}

// TestFloodIsHeldToTheBudget ingests a flood the way Run does (append,
// flush, retention once a sixteenth of the budget was written): the store
// never holds more than the budget, only the flood's oldest chunks go and
// a query over what went names the gap; a quiet Container's lines, of the
// hour before the flood and of the flood's hour, all stay (retention is
// fair per Container: the one holding the most pays first).
func TestFloodIsHeldToTheBudget(t *testing.T) {
	s, _ := Open(t.TempDir())
	budget := observe.Budget{MaxBytes: 1 << 20, MaxAgeSeconds: int64((24 * time.Hour).Seconds())}
	s.SetChunkBytes(ChunkBytesFor(budget.MaxBytes))
	flood := Container{ID: "f100d000", Name: "flood-1", Service: "flood"}
	quiet := Container{ID: "9a1e7000", Name: "quiet-1", Service: "quiet"}
	s.Append(quiet, lines(t0.Add(-time.Hour), time.Minute, 30, "before")) // the hour before
	start := t0.Add(time.Minute)
	const perPoll, polls = 200, 250 // 50,000 lines of ~200 bytes: ~10 MiB into a 1 MiB budget
	var writtenAt int64
	for p := 0; p < polls; p++ {
		s.Append(flood, floodLines(start, time.Millisecond, p*perPoll, perPoll))
		s.Append(quiet, lines(start.Add(time.Duration(p*perPoll)*time.Millisecond), time.Millisecond, 1, fmt.Sprintf("quiet%d", p)))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if s.Written()-writtenAt >= enforceAfterBytes(budget) {
			writtenAt = s.Written()
			ev, err := s.Enforce(start.Add(time.Duration(p*perPoll)*time.Millisecond), budget, Usage{Free: -1})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ev {
				if e.Container != flood.ID || e.Reason != "size cap" {
					t.Fatalf("poll %d: eviction %+v, want only the flood's chunks for the size cap", p, e)
				}
			}
		}
		if size := s.Size(); size > budget.MaxBytes {
			t.Fatalf("poll %d: the store holds %d bytes, budget %d", p, size, budget.MaxBytes)
		}
	}
	// The flood's first lines are gone, named; its newest are kept.
	res, err := s.Query(Query{Sel: Selector{Service: "flood"}, From: start.UnixNano(), To: start.Add(time.Second).UnixNano()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Hits) != 0 || len(res.Gaps) != 1 || !strings.Contains(res.Gaps[0].Reason, "size cap") {
		t.Fatalf("the flood's first second: %d lines, gaps %+v", len(res.Hits), res.Gaps)
	}
	res, _ = s.Query(Query{Sel: Selector{Service: "flood"}, Limit: 1, Newest: true})
	if len(res.Hits) != 1 || !strings.HasPrefix(string(res.Hits[0].Line), fmt.Sprintf("flood %07d ", polls*perPoll-1)) {
		t.Fatalf("the flood's newest line: %+v", res.Hits)
	}
	// The quiet Container's lines of the flood's hour are all there.
	res, _ = s.Query(Query{Sel: Selector{Service: "quiet"}, From: start.UnixNano()})
	if len(res.Hits) != polls || len(res.Gaps) != 0 {
		t.Fatalf("quiet: %d lines (want %d), gaps %+v (want none)", len(res.Hits), polls, res.Gaps)
	}
	res, _ = s.Query(Query{Sel: Selector{Service: "quiet"}, From: t0.Add(-time.Hour).UnixNano()})
	if len(res.Hits) != 30+polls || len(res.Gaps) != 0 || !strings.HasPrefix(string(res.Hits[0].Line), "before ") {
		t.Fatalf("quiet from the hour before: %d lines (want %d), gaps %+v (want none)", len(res.Hits), 30+polls, res.Gaps)
	}
}

// TestNewestLinesReadOnlyTheLastChunks: the newest lines of a store a
// flood filled with many chunks come from the last chunks, not the whole
// store, and equal the tail of a full read.
func TestNewestLinesReadOnlyTheLastChunks(t *testing.T) {
	s, _ := Open(t.TempDir())
	s.SetChunkBytes(minChunkBytes)
	flood := Container{ID: "f100d000", Name: "flood-1", Service: "web"}
	quiet := Container{ID: "9a1e7000", Name: "quiet-1", Service: "web"}
	s.Append(quiet, lines(t0, 200*time.Millisecond, 50, "quiet")) // within the flood's 20 s
	s.Append(flood, floodLines(t0, time.Millisecond, 0, 20000))
	s.Flush()
	all, _ := s.chunks("2026120110")
	if len(all) < 40 {
		t.Fatalf("%d chunks, want a flood spread over many", len(all))
	}
	full, _ := s.Query(Query{})
	before := s.chunksRead.Load()
	res, err := s.Query(Query{Limit: 10, Newest: true})
	if err != nil {
		t.Fatal(err)
	}
	if read := s.chunksRead.Load() - before; read > 3 {
		t.Fatalf("the newest 10 lines read %d of %d chunks", read, len(all))
	}
	want := strings.Join(texts(full.Hits[len(full.Hits)-10:]), "\n")
	if got := strings.Join(texts(res.Hits), "\n"); got != want {
		t.Fatalf("newest 10:\n%s\nwant:\n%s", got, want)
	}
	// Asking for more lines reaches back into older chunks and the quiet
	// Container's lines in between, in order.
	res, _ = s.Query(Query{Limit: 19000, Newest: true})
	if !strings.Contains(strings.Join(texts(res.Hits), ","), "quiet 49") {
		t.Fatalf("newest 19000: %d lines, quiet 49 missing", len(res.Hits))
	}
	if got, want := strings.Join(texts(res.Hits), "\n"), strings.Join(texts(full.Hits[len(full.Hits)-19000:]), "\n"); got != want {
		t.Fatal("the newest 19000 lines differ from the tail of a full read")
	}
}

// TestChunkNames: a chunk is named by its Container and first line; the
// first layout's <id>.seg reads as one chunk starting with its hour, and
// its lines are still found.
func TestChunkNames(t *testing.T) {
	if id, first, ok := parseChunk(chunkName("abcd", 42), 7); !ok || id != "abcd" || first != 42 {
		t.Fatalf("parse %q: %s %d %v", chunkName("abcd", 42), id, first, ok)
	}
	if id, first, ok := parseChunk("abcd.seg", 7); !ok || id != "abcd" || first != 7 {
		t.Fatalf("legacy: %s %d %v", id, first, ok)
	}
	for _, bad := range []string{"abcd.x.seg", ".seg", "abcd.json", "abcd.12"} {
		if _, _, ok := parseChunk(bad, 7); ok {
			t.Errorf("%q parsed as a chunk", bad)
		}
	}
	s, _ := Open(t.TempDir())
	c := Container{ID: "abcd1234", Name: "w"}
	s.Append(c, lines(t0, time.Second, 3, "x"))
	s.Flush()
	hour := filepath.Join(s.Dir(), "hours", "2026120110")
	if err := os.Rename(filepath.Join(hour, chunkName(c.ID, t0.UnixNano())), filepath.Join(hour, c.ID+".seg")); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Query(Query{Limit: 2, Newest: true}); strings.Join(texts(res.Hits), ",") != "x 1,x 2" {
		t.Fatalf("legacy segment: %v", texts(res.Hits))
	}
}

// TestFloodKeepsAnIdleContainersLines: a Container that wrote a few lines
// and went quiet keeps them through another's flood of ten times the
// budget in the same hour (least recently written is not who pays).
func TestFloodKeepsAnIdleContainersLines(t *testing.T) {
	s, _ := Open(t.TempDir())
	budget := observe.Budget{MaxBytes: 1 << 20}
	s.SetChunkBytes(ChunkBytesFor(budget.MaxBytes))
	flood := Container{ID: "f100d001", Name: "flood-1", Service: "flood"}
	idle := Container{ID: "1d1e0001", Name: "idle-1", Service: "idle"}
	s.Append(idle, lines(t0, time.Millisecond, 20, "idle"))
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Its chunk was last written when its lines were (the test's clock).
	idleChunks, _ := filepath.Glob(filepath.Join(s.Dir(), "hours", "*", idle.ID+"*"))
	for _, f := range idleChunks {
		if err := os.Chtimes(f, t0, t0.Add(20*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if len(idleChunks) != 1 {
		t.Fatalf("idle chunks %v", idleChunks)
	}
	const perPoll, polls = 200, 250
	var writtenAt int64
	for p := 0; p < polls; p++ {
		s.Append(flood, floodLines(t0.Add(time.Second), time.Millisecond, p*perPoll, perPoll))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if s.Written()-writtenAt >= enforceAfterBytes(budget) {
			writtenAt = s.Written()
			if _, err := s.Enforce(t0.Add(time.Minute), budget, Usage{Free: -1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if size := s.Size(); size > budget.MaxBytes {
		t.Fatalf("the store holds %d bytes, budget %d", size, budget.MaxBytes)
	}
	res, _ := s.Query(Query{Sel: Selector{Service: "idle"}})
	if len(res.Hits) != 20 || len(res.Gaps) != 0 {
		t.Fatalf("idle: %d lines (want 20), gaps %+v (want none)", len(res.Hits), res.Gaps)
	}
}
