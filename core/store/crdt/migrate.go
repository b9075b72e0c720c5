package crdt

import (
	"context"
	"fmt"
	"strings"
)

// applySchema validates the new schema, refuses destructive changes against
// the live database, applies additive ones and rebuilds capture triggers.
func (e *Engine) applySchema(ctx context.Context, src string) error {
	s, err := ParseSchema(ctx, src)
	if err != nil {
		return err
	}
	tx, err := e.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema change: %w", err)
	}
	defer tx.Rollback()
	live := map[string]bool{}
	liveIdx := map[string]string{}
	rows, err := tx.QueryContext(ctx, `SELECT type, name, coalesce(sql,'') FROM main.sqlite_master WHERE name NOT LIKE '\_\_ployz%' ESCAPE '\' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return fmt.Errorf("read live schema: %w", err)
	}
	for rows.Next() {
		var typ, name, q string
		if err := rows.Scan(&typ, &name, &q); err != nil {
			rows.Close()
			return fmt.Errorf("read live schema: %w", err)
		}
		if typ == "table" {
			live[name] = true
		} else if typ == "index" && q != "" {
			liveIdx[name] = q
		}
	}
	rows.Close()
	for name := range live {
		if s.Tables[name] == nil {
			return schemaErr("table %s: dropping a table is a destructive change and is refused", name)
		}
	}
	for name, t := range s.Tables {
		if !live[name] {
			if _, err := tx.ExecContext(ctx, t.SQL); err != nil {
				return fmt.Errorf("create table %s: %w", name, err)
			}
			continue
		}
		if err := migrateTable(ctx, tx, src, name); err != nil {
			return err
		}
	}
	for name, q := range liveIdx {
		if s.Indexes[name] != q {
			if _, err := tx.ExecContext(ctx, `DROP INDEX `+quote(name)); err != nil {
				return fmt.Errorf("drop index %s: %w", name, err)
			}
			delete(liveIdx, name)
		}
	}
	for name, q := range s.Indexes {
		if _, ok := liveIdx[name]; !ok {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("create index %s: %w", name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit schema change: %w", err)
	}
	e.schema.Store(s)
	e.wc.reset() // cached statements may name columns that just changed
	return e.installTriggers(ctx)
}

// migrateTable compares the live table with the new definition: existing
// columns must be unchanged, new ones are added with ALTER TABLE.
func migrateTable(ctx context.Context, tx querier2, src, name string) error {
	old, err := tableInfo(ctx, tx, name)
	if err != nil {
		return err
	}
	scratch, err := scratchColumns(ctx, src, name)
	if err != nil {
		return err
	}
	byName := map[string]colInfo{}
	for _, c := range scratch {
		byName[c.name] = c
	}
	have := map[string]bool{}
	for _, c := range old {
		have[c.name] = true
		n, ok := byName[c.name]
		if !ok {
			return schemaErr("table %s column %s: removing a column is a destructive change and is refused", name, c.name)
		}
		if !strings.EqualFold(n.typ, c.typ) || n.notnull != c.notnull || n.pk != c.pk || n.dflt != c.dflt || n.hidden != c.hidden {
			return schemaErr("table %s column %s: changing a column is a destructive change and is refused", name, c.name)
		}
	}
	for _, c := range scratch {
		if have[c.name] {
			continue
		}
		if c.pk > 0 || c.hidden != 0 {
			return schemaErr("table %s column %s: only plain columns can be added to an existing table", name, c.name)
		}
		def := quote(c.name) + " " + c.typ
		if c.notnull {
			def += " NOT NULL"
		}
		if c.dflt.Valid {
			def += " DEFAULT " + c.dflt.String
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+quote(name)+` ADD COLUMN `+def); err != nil {
			return fmt.Errorf("table %s column %s: add column: %w", name, c.name, err)
		}
	}
	return nil
}

func scratchColumns(ctx context.Context, src, name string) ([]colInfo, error) {
	db, err := openScratch(ctx, src)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return tableInfo(ctx, db, name)
}

func quote(id string) string { return `"` + strings.ReplaceAll(id, `"`, `""`) + `"` }

// installTriggers (re)creates the TEMP capture triggers on the writer
// connection. Being TEMP they exist only there, so writes through any other
// connection are not captured — which is why all writes go through Exec.
func (e *Engine) installTriggers(ctx context.Context) error {
	rows, err := e.w.QueryContext(ctx, `SELECT name FROM temp.sqlite_master WHERE type='trigger'`)
	if err != nil {
		return fmt.Errorf("list capture triggers: %w", err)
	}
	var old []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		old = append(old, n)
	}
	rows.Close()
	for _, n := range old {
		if _, err := e.w.ExecContext(ctx, `DROP TRIGGER temp.`+quote(n)); err != nil {
			return fmt.Errorf("drop trigger %s: %w", n, err)
		}
	}
	for _, t := range e.schema.Load().Tables {
		for _, q := range triggerSQL(t) {
			if _, err := e.w.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("table %s: create capture trigger: %w", t.Name, err)
			}
		}
	}
	return nil
}

func triggerSQL(t *Table) []string {
	tn := quote(t.Name)
	lit := "'" + strings.ReplaceAll(t.Name, "'", "''") + "'"
	pkOf := func(ref string) string {
		parts := make([]string, len(t.PK))
		for i, p := range t.PK {
			parts[i] = ref + "." + quote(p)
		}
		return "json_array(" + strings.Join(parts, ",") + ")"
	}
	same := make([]string, len(t.PK))
	for i, p := range t.PK {
		same[i] = "OLD." + quote(p) + " IS NEW." + quote(p)
	}
	samePK := "(" + strings.Join(same, " AND ") + ")"
	ins := "INSERT INTO temp.__ployz_pending(tbl,pk,col) "
	var upd strings.Builder
	upd.WriteString(ins + "SELECT " + lit + "," + pkOf("OLD") + ",'-del' WHERE NOT " + samePK + ";\n")
	upd.WriteString(ins + "SELECT " + lit + "," + pkOf("NEW") + ",'-ins' WHERE NOT " + samePK + ";\n")
	for _, c := range t.Cols {
		clit := "'" + strings.ReplaceAll(c, "'", "''") + "'"
		upd.WriteString(ins + "SELECT " + lit + "," + pkOf("NEW") + "," + clit + " WHERE " + samePK +
			" AND OLD." + quote(c) + " IS NOT NEW." + quote(c) + ";\n")
	}
	name := func(kind string) string { return quote("__ployz_" + kind + "_" + t.Name) }
	return []string{
		"CREATE TEMP TRIGGER " + name("ins") + " AFTER INSERT ON main." + tn + " BEGIN " + ins + "VALUES(" + lit + "," + pkOf("NEW") + ",'-ins'); END",
		"CREATE TEMP TRIGGER " + name("del") + " AFTER DELETE ON main." + tn + " BEGIN " + ins + "VALUES(" + lit + "," + pkOf("OLD") + ",'-del'); END",
		"CREATE TEMP TRIGGER " + name("upd") + " AFTER UPDATE ON main." + tn + " BEGIN " + upd.String() + " END",
	}
}
