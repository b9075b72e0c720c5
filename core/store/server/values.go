package server

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Statement is one SQL statement in any of Corrosion's four JSON forms:
// "SQL", ["SQL", [params]], ["SQL", {":name": v}], or
// {"query": "SQL", "params": [...], "named_params": {...}}.
type Statement struct {
	Query  string
	Params []any
	Named  map[string]any
}

// UnmarshalJSON accepts the four statement forms.
func (s *Statement) UnmarshalJSON(b []byte) error {
	dec := func(data []byte, v any) error {
		d := json.NewDecoder(strings.NewReader(string(data)))
		d.UseNumber()
		return d.Decode(v)
	}
	trimmed := strings.TrimSpace(string(b))
	switch {
	case strings.HasPrefix(trimmed, `"`):
		if err := json.Unmarshal(b, &s.Query); err != nil {
			return fmt.Errorf("statement query: %w", err)
		}
		return nil
	case strings.HasPrefix(trimmed, `[`):
		var parts []json.RawMessage
		if err := json.Unmarshal(b, &parts); err != nil {
			return fmt.Errorf("statement: %w", err)
		}
		if len(parts) != 2 {
			return fmt.Errorf("statement array must be [query, params], got %d elements", len(parts))
		}
		if err := json.Unmarshal(parts[0], &s.Query); err != nil {
			return fmt.Errorf("statement query: %w", err)
		}
		p := strings.TrimSpace(string(parts[1]))
		if strings.HasPrefix(p, "{") {
			if err := dec(parts[1], &s.Named); err != nil {
				return fmt.Errorf("statement named params: %w", err)
			}
			return nil
		}
		if err := dec(parts[1], &s.Params); err != nil {
			return fmt.Errorf("statement params: %w", err)
		}
		return nil
	case strings.HasPrefix(trimmed, `{`):
		var v struct {
			Query  *string        `json:"query"`
			Params []any          `json:"params"`
			Named  map[string]any `json:"named_params"`
		}
		if err := dec(b, &v); err != nil {
			return fmt.Errorf("statement object: %w", err)
		}
		if v.Query == nil {
			return fmt.Errorf(`statement object needs a "query" field`)
		}
		s.Query, s.Params, s.Named = *v.Query, v.Params, v.Named
		return nil
	}
	return fmt.Errorf("statement must be a string, an array or an object")
}

// Args converts the parameters to driver arguments using Corrosion's
// binding rules: bools as 0/1, arrays of small integers as BLOBs, any other
// array or object as its JSON text.
func (s *Statement) Args() []any {
	var out []any
	for _, p := range s.Params {
		out = append(out, bindValue(p))
	}
	for k, v := range s.Named {
		out = append(out, namedArg(strings.TrimLeft(k, ":@$"), bindValue(v)))
	}
	return out
}

func bindValue(v any) any {
	switch x := v.(type) {
	case nil, string:
		return x
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		if b, ok := smallInts(x); ok {
			return b
		}
	}
	j, _ := json.Marshal(v)
	return string(j)
}

func smallInts(xs []any) ([]byte, bool) {
	if len(xs) == 0 {
		return nil, false
	}
	out := make([]byte, len(xs))
	for i, x := range xs {
		n, ok := x.(json.Number)
		if !ok {
			return nil, false
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || v < 0 || v > 255 {
			return nil, false
		}
		out[i] = byte(v)
	}
	return out, true
}

// renderValue turns a driver value into Corrosion's JSON result form: BLOBs
// as arrays of byte values.
func renderValue(v any) any {
	switch x := v.(type) {
	case []byte:
		out := make([]int, len(x))
		for i, b := range x {
			out[i] = int(b)
		}
		return out
	case time.Time:
		return x.Format("2006-01-02 15:04:05.999999999-07:00")
	default:
		return x
	}
}

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

func namedArg(name string, v any) any { return sql.Named(name, v) }
