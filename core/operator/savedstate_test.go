package operator

import (
	"errors"
	"strings"
	"testing"
)

func TestSavedStateRevisionsIncrementAndAreDurable(t *testing.T) {
	s, p := open(t)
	if _, err := s.LatestState("lab", "hello", "production"); !errors.Is(err, ErrNoSavedState) {
		t.Fatalf("empty store: %v", err)
	}
	for i, body := range []string{"a", "b", "c"} {
		st, err := s.SaveState("lab", "hello", "production", []byte(body))
		if err != nil || st.Revision != i+1 {
			t.Fatalf("save %d = %+v, %v", i, st, err)
		}
	}
	if st, err := s.SaveState("lab", "hello", "staging", []byte("x")); err != nil || st.Revision != 1 {
		t.Fatalf("another environment numbers from 1: %+v, %v", st, err)
	}
	s.Close()
	s2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	st, err := s2.LatestState("lab", "hello", "production")
	if err != nil || st.Revision != 3 || string(st.Compose) != "c" || st.CreatedAt.IsZero() {
		t.Fatalf("after reopen: %+v, %v", st, err)
	}
	if st, _ := s2.SaveState("lab", "hello", "production", []byte("d")); st.Revision != 4 {
		t.Fatalf("revision after reopen = %d", st.Revision)
	}
	if st, err := s2.SaveState("lab", "hello", "production", nil); err != nil || st.Revision != 5 {
		t.Fatalf("empty (removal) revision: %+v, %v", st, err)
	}
	if st, err := s2.LatestState("lab", "hello", "production"); err != nil || len(st.Compose) != 0 || st.Revision != 5 {
		t.Fatalf("latest after removal revision: %+v, %v", st, err)
	}
	all, err := s2.States("lab")
	if err != nil || len(all) != 6 {
		t.Fatalf("states = %+v, %v", all, err)
	}
}

func TestRemovalMarks(t *testing.T) {
	s, _ := open(t)
	if err := s.MarkRemoval("lab", "hello", "production"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkRemoval("lab", "hello", "production"); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	rs, err := s.Removals("lab")
	if err != nil || len(rs) != 1 || rs[0].Project != "hello" {
		t.Fatalf("removals = %+v, %v", rs, err)
	}
	if err := s.ClearRemoval("lab", "hello", "production"); err != nil {
		t.Fatal(err)
	}
	if rs, _ := s.Removals("lab"); len(rs) != 0 {
		t.Fatalf("cleared mark still there: %+v", rs)
	}
}

func TestStateByRevision(t *testing.T) {
	s, _ := open(t)
	if _, err := s.State("lab", "hello", "production", 1); !errors.Is(err, ErrNoSavedState) {
		t.Fatalf("no revisions = %v; want ErrNoSavedState", err)
	}
	for _, c := range []string{"name: hello # 1", "name: hello # 2"} {
		if _, err := s.SaveState("lab", "hello", "production", []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.State("lab", "hello", "production", 1)
	if err != nil || string(st.Compose) != "name: hello # 1" || st.Revision != 1 {
		t.Fatalf("revision 1 = %+v, %v", st, err)
	}
	if _, err := s.State("lab", "hello", "production", 7); err == nil || !strings.Contains(err.Error(), "revision 7") || !strings.Contains(err.Error(), "1 to 2") {
		t.Fatalf("unknown revision = %v; want one naming it and the range", err)
	}
}
