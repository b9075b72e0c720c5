package crdt

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The SQLite driver turns TEXT read from a column declared DATE, DATETIME
// or TIMESTAMP into time.Time, and there is no option to stop it. Clients
// must get values exactly as stored (Corrosion returns the text), so a
// query reading such a column is run again with those columns behind a
// unary '+': same value and type, but an expression, which has no declared
// type for the driver to act on.

// timeDecls are the declared types the driver parses.
var timeDecls = map[string]bool{"DATE": true, "DATETIME": true, "TIMESTAMP": true}

// rawTimeQuery returns q rewritten so no result column has a date
// declared type, or "" when q needs no rewrite.
func rawTimeQuery(q string, rows *sql.Rows) (string, error) {
	types, err := rows.ColumnTypes()
	if err != nil {
		return "", err
	}
	needed := false
	for _, t := range types {
		needed = needed || timeDecls[t.DatabaseTypeName()]
	}
	if !needed {
		return "", nil
	}
	body := q
	if end, err := statementEnd(q); err != nil {
		return "", err
	} else if end >= 0 {
		body = q[:end]
	}
	names := make([]string, len(types))
	outs := make([]string, len(types))
	for i, t := range types {
		names[i] = fmt.Sprintf("c%d", i)
		expr := names[i]
		if timeDecls[t.DatabaseTypeName()] {
			expr = "+" + expr
		}
		outs[i] = expr + " AS " + quoteIdent(t.Name())
	}
	return "WITH __ployz_raw(" + strings.Join(names, ",") + ") AS (\n" + body + "\n) SELECT " +
		strings.Join(outs, ", ") + " FROM __ployz_raw", nil
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// queryRaw runs a client query on the guarded pool, rerunning it through
// rawTimeQuery when it reads a date-typed column.
func (e *Engine) queryRaw(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := e.qdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, guardErr(err, &e.qden)
	}
	raw, err := rawTimeQuery(q, rows)
	if err != nil || raw == "" {
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("query columns: %w", err)
		}
		return rows, nil
	}
	rows.Close()
	rows, err = e.qdb.QueryContext(ctx, raw, args...)
	return rows, guardErr(err, &e.qden)
}
