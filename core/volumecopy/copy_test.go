package volumecopy

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

var t0 = time.Unix(1_800_000_000, 0)

// TestApply walks every row of the transition table, the replays and
// every refusal, each with the field it names and the copy unchanged.
func TestApply(t *testing.T) {
	here := Facts{Exists: true}
	writer := Copy{Role: Writer, Epoch: 100, Floor: 3}
	mirror := Copy{Role: Mirror, Floor: 3}
	none := Copy{Floor: 3}
	req := func(expect, want string, gen uint64) rpc.SetVolumeCopyRequest {
		return rpc.SetVolumeCopyRequest{Volume: "db", Gen: gen, Expect: expect, Want: want}
	}
	for _, c := range []struct {
		name    string
		cur     Copy
		req     rpc.SetVolumeCopyRequest
		facts   Facts
		want    string // role after, when accepted
		changed bool
		field   string // refusal's field; "" accepted
		code    string
		epoch   string // "new", "kept", "none"
	}{
		// The rows.
		{"none→writer", none, req(None, Writer, 4), here, Writer, true, "", "", "new"},
		{"none→writer needs the dataset", none, req(None, Writer, 4), Facts{}, "", false, "volume", rpc.CodeFailedPrecond, ""},
		{"none→mirror", none, req(None, Mirror, 4), here, Mirror, true, "", "", "none"},
		{"none→mirror needs the dataset", none, req(None, Mirror, 4), Facts{}, "", false, "volume", rpc.CodeFailedPrecond, ""},
		{"mirror→writer", mirror, req(Mirror, Writer, 4), here, Writer, true, "", "", "new"},
		{"writer→mirror", writer, req(Writer, Mirror, 4), here, Mirror, true, "", "", "none"},
		{"writer→mirror refused while mounted", writer, req(Writer, Mirror, 4), Facts{Exists: true, MountedBy: []string{"web-1"}}, "", false, "want", rpc.CodeFailedPrecond, ""},
		{"mirror→none", mirror, req(Mirror, None, 4), here, None, true, "", "", "none"},
		{"writer→none refused", writer, req(Writer, None, 4), here, "", false, "want", rpc.CodeFailedPrecond, ""},
		// Already at want: a replay answers success and raises the floor.
		{"replay writer", writer, req(Mirror, Writer, 5), here, Writer, true, "", "", "kept"},
		{"replay writer same gen", writer, req(Writer, Writer, 3), here, Writer, false, "", "", "kept"},
		{"replay mirror", mirror, req(None, Mirror, 3), Facts{}, Mirror, false, "", "", "none"},
		{"replay none", none, req(Mirror, None, 3), Facts{}, None, false, "", "", "none"},
		// The fence and the expected copy.
		{"late gen", writer, req(Writer, Mirror, 2), here, "", false, "gen", rpc.CodeFailedPrecond, ""},
		{"late gen even at want", writer, req(Mirror, Writer, 2), here, "", false, "gen", rpc.CodeFailedPrecond, ""},
		{"expect gone", mirror, req(Writer, None, 4), here, "", false, "expect", rpc.CodeFailedPrecond, ""},
		{"expect gone for mirror", writer, req(None, Mirror, 4), here, "", false, "expect", rpc.CodeFailedPrecond, ""},
		// A Container task running on the volume holds its mount.
		{"demote refused while a task runs", writer, req(Writer, Mirror, 4), Facts{Exists: true, Busy: []string{"start c1 (run gen 4)"}}, "", false, "volume", rpc.CodeFailedPrecond, ""},
		{"promote refused while a task runs", mirror, req(Mirror, Writer, 4), Facts{Exists: true, Busy: []string{"stop c1 (run gen 4)"}}, "", false, "volume", rpc.CodeFailedPrecond, ""},
		{"fence while a task runs", writer, req(Writer, Writer, 4), Facts{Exists: true, Busy: []string{"start c1 (run gen 4)"}}, Writer, true, "", "", "kept"},
		// Bad input.
		{"no gen", writer, req(Writer, Mirror, 0), here, "", false, "gen", rpc.CodeInvalidArgument, ""},
		{"bad expect", writer, req("master", Mirror, 4), here, "", false, "expect", rpc.CodeInvalidArgument, ""},
		{"bad want", writer, req(Writer, "", 4), here, "", false, "want", rpc.CodeInvalidArgument, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, changed, err := Apply(c.cur, c.req, c.facts, t0)
			if c.field != "" {
				var e *rpc.Error
				if !errors.As(err, &e) {
					t.Fatalf("accepted (%+v), want a refusal naming %s", next, c.field)
				}
				if e.Code != c.code || e.Details["field"] != c.field {
					t.Fatalf("refusal %s %v (%s), want %s naming %s", e.Code, e.Details["field"], e.Message, c.code, c.field)
				}
				if next != c.cur || changed {
					t.Fatalf("a refusal changed the copy: %+v → %+v", c.cur, next)
				}
				if e.Code == rpc.CodeFailedPrecond && e.Details["copy"] != c.cur.View() {
					t.Fatalf("refusal reports copy %v, want %v", e.Details["copy"], c.cur.View())
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if next.RoleOf() != c.want || changed != c.changed || next.Floor != c.req.Gen {
				t.Fatalf("got %+v changed %v, want role %s changed %v floor %d", next, changed, c.want, c.changed, c.req.Gen)
			}
			switch c.epoch {
			case "new":
				if next.Epoch != t0.UnixNano() {
					t.Fatalf("epoch %d, want a new one %d", next.Epoch, t0.UnixNano())
				}
			case "kept":
				if next.Epoch != c.cur.Epoch {
					t.Fatalf("epoch %d, want %d kept", next.Epoch, c.cur.Epoch)
				}
			case "none":
				if next.Epoch != 0 {
					t.Fatalf("a %s has epoch %d", next.RoleOf(), next.Epoch)
				}
			}
		})
	}
}

// TestEpochRises: a Writer's new epoch is above its last one even when
// the clock went back.
func TestEpochRises(t *testing.T) {
	cur := Copy{Role: Mirror, Epoch: t0.UnixNano() + 50, Floor: 1}
	next, _, err := Apply(cur, rpc.SetVolumeCopyRequest{Volume: "db", Gen: 1, Expect: Mirror, Want: Writer}, Facts{Exists: true}, t0)
	if err != nil || next.Epoch != cur.Epoch+1 {
		t.Fatalf("epoch %d (%v), want %d", next.Epoch, err, cur.Epoch+1)
	}
}

// TestStore persists changes, keeps the floor across removal and reads
// the file a daemon wrote before (fixture).
func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Created("db"); err != nil || c.RoleOf() != Writer || c.Epoch == 0 {
		t.Fatalf("created: %+v %v", c, err)
	}
	facts := func() (Facts, error) { return Facts{Exists: true}, nil }
	if _, _, err := s.Set(context.Background(), rpc.SetVolumeCopyRequest{Volume: "db", Gen: 7, Expect: Writer, Want: Mirror}, facts); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Created("db"); err != nil || c.RoleOf() != Mirror {
		t.Fatalf("create over a Mirror changed it: %+v %v", c, err)
	}
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if c := s2.Get("db"); c.RoleOf() != Mirror || c.Floor != 7 {
		t.Fatalf("reopened: %+v", c)
	}
	if err := s2.Removed("db"); err != nil {
		t.Fatal(err)
	}
	if c := s2.Get("db"); c.RoleOf() != None || c.Floor != 7 {
		t.Fatalf("removed: %+v, want none keeping floor 7", c)
	}
	_, _, err = s2.Set(context.Background(), rpc.SetVolumeCopyRequest{Volume: "db", Gen: 6, Expect: None, Want: Writer}, facts)
	if err == nil {
		t.Fatal("a gen below the floor kept across removal was accepted")
	}
	// A file from this version (with a field a later one might add).
	old, err := Open(filepath.Join("testdata", FileName))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Copy{"db": {Role: Writer, Epoch: 1764680000000000000, Floor: 4, Changed: 1764680000000000000}, "logs": {Role: Mirror, Floor: 2}}
	for k, v := range want {
		if old.Get(k) != v {
			t.Errorf("fixture %s: %+v, want %+v", k, old.Get(k), v)
		}
	}
}
