package volumecopy

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// TestAdmitRollback: only the Writer, at or above its floor, with no
// running Container and no task on it, is rolled back; each refusal
// names its field and carries the copy.
func TestAdmitRollback(t *testing.T) {
	w := Copy{Role: Writer, Epoch: 7, Floor: 4}
	if err := AdmitRollback(w, "db", 4, Facts{Exists: true}); err != nil {
		t.Fatalf("the Writer at its floor: %v", err)
	}
	for name, c := range map[string]struct {
		cur   Copy
		gen   uint64
		f     Facts
		field string
		words string
	}{
		"a Mirror":         {Copy{Role: Mirror, Floor: 2}, 3, Facts{}, "volume", "mirror, not the Writer"},
		"no role":          {Copy{}, 3, Facts{}, "volume", "none, not the Writer"},
		"a late run":       {w, 3, Facts{}, "gen", "below this copy's floor 4"},
		"a running mount":  {w, 5, Facts{MountedBy: []string{"web-ab12"}}, "volume", "--stop"},
		"a task in flight": {w, 5, Facts{Busy: []string{"start c1"}}, "volume", "busy"},
	} {
		err := AdmitRollback(c.cur, "db", c.gen, c.f)
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond || e.Details["field"] != c.field || !strings.Contains(e.Message, c.words) || e.Details["copy"] != c.cur.View() {
			t.Errorf("%s: %v (%+v)", name, err, e)
		}
	}
}

// TestStoreRollbackRunsOnlyWhenAdmitted: a refused rollback never runs.
func TestStoreRollbackRunsOnlyWhenAdmitted(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Created("db"); err != nil {
		t.Fatal(err)
	}
	ran := 0
	do := func() error { ran++; return nil }
	if err := s.Rollback(context.Background(), "db", 1, func() (Facts, error) { return Facts{MountedBy: []string{"web"}}, nil }, do); err == nil || ran != 0 {
		t.Fatalf("mounted: %v, ran %d", err, ran)
	}
	if err := s.Rollback(context.Background(), "db", 1, func() (Facts, error) { return Facts{}, errors.New("docker down") }, do); err == nil || ran != 0 {
		t.Fatalf("facts unreadable: %v, ran %d", err, ran)
	}
	if err := s.Rollback(context.Background(), "db", 1, func() (Facts, error) { return Facts{Exists: true}, nil }, do); err != nil || ran != 1 {
		t.Fatalf("admitted: %v, ran %d", err, ran)
	}
}
