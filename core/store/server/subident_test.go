package server

import (
	"context"
	"testing"

	"github.com/ployz/ployz/core/store/crdt"
)

func TestIdentityQuery(t *testing.T) {
	eng, err := crdt.Open(context.Background(), t.TempDir()+"/s.db", testSchemaSQL+
		`CREATE TABLE owners (id TEXT NOT NULL, zone TEXT NOT NULL, name TEXT, PRIMARY KEY (zone, id));`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cases := []struct{ in, out string }{
		{`SELECT v FROM kv`, `SELECT "kv"."k" AS "__ployz_id_0", v FROM kv`},
		{`select * from main.kv where k > ?`, `select "kv"."k" AS "__ployz_id_0", * from main.kv where k > ?`},
		{`SELECT kv.v, o.name FROM kv JOIN owners AS o ON o.id = kv.v ORDER BY kv.k`,
			`SELECT "kv"."k" AS "__ployz_id_0", "o"."zone" AS "__ployz_id_1", "o"."id" AS "__ployz_id_2", kv.v, o.name FROM kv JOIN owners AS o ON o.id = kv.v ORDER BY kv.k`},
		{`SELECT a.v FROM kv a LEFT OUTER JOIN "owners" o ON o.id = a.v, kv b WHERE b.k = a.k`,
			`SELECT "a"."k" AS "__ployz_id_0", "o"."zone" AS "__ployz_id_1", "o"."id" AS "__ployz_id_2", "b"."k" AS "__ployz_id_3", a.v FROM kv a LEFT OUTER JOIN "owners" o ON o.id = a.v, kv b WHERE b.k = a.k`},
		{`SELECT v FROM kv WHERE k IN (SELECT id FROM owners GROUP BY id)`, `SELECT "kv"."k" AS "__ployz_id_0", v FROM kv WHERE k IN (SELECT id FROM owners GROUP BY id)`},
		{`SELECT DISTINCT v FROM kv`, ``},
		{`SELECT count(*) FROM kv`, ``},
		{`SELECT coalesce(max(n), 0) FROM kv`, ``},
		{`SELECT v, count(*) FROM kv GROUP BY v`, ``},
		{`SELECT v FROM kv UNION SELECT name FROM owners`, ``},
		{`SELECT v FROM (SELECT * FROM kv)`, ``},
		{`SELECT value FROM json_each('[1]')`, ``},
		{`WITH x AS (SELECT * FROM kv) SELECT v FROM x`, ``},
		{`SELECT 1`, ``},
		{`SELECT k, v FROM kv ORDER BY 2 DESC, 1`, ``},
		{`SELECT k, v FROM kv ORDER BY v, k LIMIT 10`, `SELECT "kv"."k" AS "__ployz_id_0", k, v FROM kv ORDER BY v, k LIMIT 10`},
	}
	for _, c := range cases {
		got, _, ok := identityQuery(c.in, eng.Schema())
		if !ok {
			got = ""
		}
		if got != c.out {
			t.Errorf("%s:\n got  %s\n want %s", c.in, got, c.out)
		}
		if ok {
			if rows, err := eng.Query(context.Background(), got, "x"); err != nil {
				t.Errorf("rewritten query does not run: %s: %v", got, err)
			} else {
				rows.Close()
			}
		}
	}
}
