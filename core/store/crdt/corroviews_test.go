package crdt

import (
	"context"
	"encoding/hex"
	"reflect"
	"sort"
	"testing"
)

// TestCorrosionBookkeepingViews checks crsql_db_versions and
// __corro_bookkeeping_gaps answer a client's query with Corrosion's
// columns, from the version book: site ids as 16-byte BLOBs, the highest
// version per site, and each missing run of versions.
func TestCorrosionBookkeepingViews(t *testing.T) {
	ctx := context.Background()
	a, b := openTest(t, "a"), openTest(t, "b")
	var fromA []Changeset
	a.OnCommit(func(c Commit) {
		if c.Local {
			fromA = append(fromA, c.Changesets...)
		}
	})
	for _, k := range []string{"w", "x", "y", "z", "zz"} {
		exec(t, a, `INSERT INTO kv(k, v) VALUES ('`+k+`', 'a')`)
	}
	exec(t, b, `INSERT INTO kv(k, v) VALUES ('b', 'b')`)
	// b holds versions 2 and 5 of a: 1 and 3..4 are gaps.
	for _, i := range []int{1, 4} {
		if _, err := b.Apply(ctx, fromA[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	blob := func(site string) string { return string(mustUnhex(t, site)) }
	type row struct {
		site string
		x, y int64
	}
	read := func(q string) []row {
		t.Helper()
		rows, err := b.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			var site []byte
			var y *int64
			dest := []any{&site, &r.x}
			if cols, _ := rows.Columns(); len(cols) == 3 {
				dest = append(dest, &y)
			}
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			if y != nil {
				r.y = *y
			}
			r.site = string(site)
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].site+string(rune(out[i].x)) < out[j].site+string(rune(out[j].x)) })
		return out
	}
	got := read(`SELECT site_id, db_version FROM crsql_db_versions`)
	want := []row{{blob(a.Site()), 5, 0}, {blob(b.Site()), 1, 0}}
	sort.Slice(want, func(i, j int) bool { return want[i].site < want[j].site })
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("crsql_db_versions: %+v want %+v", got, want)
	}
	got = read(`SELECT actor_id, start, end FROM __corro_bookkeeping_gaps`)
	want = []row{{blob(a.Site()), 1, 1}, {blob(a.Site()), 3, 4}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("__corro_bookkeeping_gaps: %+v want %+v", got, want)
	}
	var sum int64
	if err := b.ReadDB().QueryRow(`SELECT COALESCE(SUM(end - start + 1), 0) FROM __corro_bookkeeping_gaps`).Scan(&sum); err != nil || sum != b.Book().Gaps() {
		t.Fatalf("gap sum %d (%v), book counts %d", sum, err, b.Book().Gaps())
	}
	if _, _, err := b.Exec(ctx, []Stmt{{Query: `DELETE FROM crsql_db_versions`}}); err == nil {
		t.Fatal("a client deleted from crsql_db_versions")
	}
}

func mustUnhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 16 {
		t.Fatalf("site id %q is not 16 hex bytes", s)
	}
	return b
}
