package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/store/crdt"
)

// FuzzStatement decodes arbitrary bytes as one statement of a store HTTP
// body (transactions, queries, subscriptions). Properties: no panic; a
// refusal starts with "statement" and says which part; an accepted
// statement binds one argument per parameter and, written in the object
// form, decodes to the same statement.
func FuzzStatement(f *testing.F) {
	for _, s := range []string{
		`"SELECT 1"`,
		`["INSERT INTO kv (k, v) VALUES (?, ?)", ["a", 1.5]]`,
		`["UPDATE kv SET v = :v", {":v": [1, 2, 255]}]`,
		`{"query": "SELECT * FROM kv WHERE k = ?", "params": [true, null, {"x": 1}], "named_params": {"$y": 9007199254740993}}`,
		`{"params": []}`,
		`[42]`,
		`["q", "not params"]`,
		` 7`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Statement
		if err := s.UnmarshalJSON(b); err != nil {
			if !strings.HasPrefix(err.Error(), "statement") {
				t.Fatalf("refusal does not name the statement part: %v", err)
			}
			return
		}
		if n := len(s.Args()); n != len(s.Params)+len(s.Named) {
			t.Fatalf("%d arguments bound for %d parameters", n, len(s.Params)+len(s.Named))
		}
		obj, err := json.Marshal(map[string]any{"query": s.Query, "params": s.Params, "named_params": s.Named})
		if err != nil {
			t.Fatalf("accepted statement cannot be written again: %v", err)
		}
		var again Statement
		if err := again.UnmarshalJSON(obj); err != nil {
			t.Fatalf("object form %s refused: %v", obj, err)
		}
		a, _ := json.Marshal([]any{s.Query, s.Params, s.Named})
		c, _ := json.Marshal([]any{again.Query, again.Params, again.Named})
		if string(a) != string(c) {
			t.Fatalf("round trip changed the statement:\n %s\n %s", a, c)
		}
	})
}

// FuzzPeerEnvelope decodes arbitrary bytes as a peer message, the gob
// envelope gossip members send each other over UDP and TCP: untrusted
// network input. Properties: no panic and no runaway allocation; a
// refusal starts with "peer message"; an accepted envelope encodes and
// decodes to itself.
func FuzzPeerEnvelope(f *testing.F) {
	for _, e := range []envelope{
		{Kind: msgChanges, From: "site-a", Changesets: []crdt.Changeset{{Site: "site-a", Version: 3, LastVersion: 3, Changes: []crdt.Change{
			{Table: "kv", PK: `["a"]`, Col: "v", Val: crdt.Value{K: crdt.KindText, S: "one"}, ColVersion: 1, CL: 1, Seq: 0},
			{Table: "kv", PK: `["a"]`, Col: crdt.SentinelCol, ColVersion: 1, CL: 1, Seq: 1},
		}}, {Site: "site-b", Version: 4, LastVersion: 9}}},
		{Kind: msgSyncReq, From: "site-b", Book: crdt.Book{"site-a": {{Lo: 1, Hi: 3}}}},
		{Kind: msgSyncDigest, From: "site-b", Digest: crdt.Book{"site-a": {{Lo: 1, Hi: 3}}}.Digest()},
		{Kind: msgSyncWant, From: "site-a"},
	} {
		b, err := encodeEnvelope(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("P"))
	f.Add([]byte("Xjunk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "peer message") && !strings.HasPrefix(err.Error(), "decode peer message") {
				t.Fatalf("refusal %v", err)
			}
			return
		}
		first, err := encodeEnvelope(e)
		if err != nil {
			t.Fatalf("accepted envelope cannot be encoded: %v", err)
		}
		e2, err := decodeEnvelope(first)
		if err != nil {
			t.Fatalf("own encoding refused: %v", err)
		}
		if a, c := show(e), show(e2); a != c {
			t.Fatalf("round trip changed the envelope:\n %s\n %s", a, c)
		}
	})
}

// show prints an envelope so equal ones print alike: NaN floats and nil
// versus empty slices and maps (gob sends neither) compare equal.
func show(e envelope) string {
	for i := range e.Changesets {
		if len(e.Changesets[i].Changes) == 0 {
			e.Changesets[i].Changes = nil
		}
		for j := range e.Changesets[i].Changes {
			v := &e.Changesets[i].Changes[j].Val
			if math.IsNaN(v.F) {
				v.F = 0
				v.S += "\x00NaN"
			}
			if len(v.B) == 0 {
				v.B = nil
			}
		}
	}
	if len(e.Changesets) == 0 {
		e.Changesets = nil
	}
	if len(e.Book) == 0 {
		e.Book = nil
	}
	for k, r := range e.Book {
		if len(r) == 0 {
			e.Book[k] = nil
		}
	}
	return fmt.Sprintf("%#v", e)
}
