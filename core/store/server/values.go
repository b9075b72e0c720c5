package server

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Statement is one SQL statement in any of Corrosion's four JSON forms:
// "SQL", ["SQL", [params]], ["SQL", {":name": v}], or
// {"query": "SQL", "params": [...], "named_params": {...}}. Parameters are
// kept as the JSON text the client sent, so an object parameter binds as
// exactly that text (Corrosion's raw JSON value).
type Statement struct {
	Query  string
	Params []json.RawMessage
	Named  map[string]json.RawMessage
}

// UnmarshalJSON accepts the four statement forms.
func (s *Statement) UnmarshalJSON(b []byte) error {
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
			if err := json.Unmarshal(parts[1], &s.Named); err != nil {
				return fmt.Errorf("statement named params: %w", err)
			}
			return nil
		}
		if err := json.Unmarshal(parts[1], &s.Params); err != nil {
			return fmt.Errorf("statement params: %w", err)
		}
		return nil
	case strings.HasPrefix(trimmed, `{`):
		var v struct {
			Query  *string                    `json:"query"`
			Params []json.RawMessage          `json:"params"`
			Named  map[string]json.RawMessage `json:"named_params"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
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
// binding rules (see bindValue).
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

// paramsJSON is the positional parameters as one JSON array, each element
// byte for byte as received (json.Marshal would re-encode them).
func (s *Statement) paramsJSON() string {
	parts := make([]string, len(s.Params))
	for i, p := range s.Params {
		parts[i] = string(p)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// bindValue binds one JSON parameter the way Corrosion's SqliteParam
// decodes it: null; a bool as 0/1; an integer that fits in 64 bits as
// INTEGER, any other number as REAL; a string as TEXT; an array of
// integers 0..255 (the empty array too) as a BLOB; anything else — an
// object, any other array — as its JSON text exactly as sent.
func bindValue(raw json.RawMessage) any {
	t := strings.TrimSpace(string(raw))
	switch {
	case t == "null" || t == "":
		return nil
	case t == "true":
		return int64(1)
	case t == "false":
		return int64(0)
	case t[0] == '"':
		var s string
		if err := json.Unmarshal([]byte(t), &s); err == nil {
			return s
		}
	case t[0] == '[':
		if b, ok := smallInts([]byte(t)); ok {
			return b
		}
	case t[0] == '-' || (t[0] >= '0' && t[0] <= '9'):
		if i, err := strconv.ParseInt(t, 10, 64); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil {
			return f
		}
	}
	return t
}

// smallInts decodes a JSON array of integers 0..255 as bytes.
func smallInts(raw []byte) ([]byte, bool) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, false
	}
	out := make([]byte, len(elems))
	for i, e := range elems {
		v, err := strconv.ParseUint(string(e), 10, 8)
		if err != nil {
			return nil, false
		}
		out[i] = byte(v)
	}
	return out, true
}

// renderValue turns a driver value into Corrosion's JSON result form:
// BLOBs as arrays of byte values, REALs always written as reals.
func renderValue(v any) any {
	switch x := v.(type) {
	case []byte:
		out := make([]int, len(x))
		for i, b := range x {
			out[i] = int(b)
		}
		return out
	case float64:
		return sqlReal(x)
	case time.Time:
		// Only reached if a date-typed column escaped the engine's raw
		// reads (crdt.Engine.Query); kept so nothing renders as an object.
		return x.Format("2006-01-02 15:04:05.999999999-07:00")
	default:
		return x
	}
}

// sqlReal is a REAL value written as serde_json writes an f64: always with a
// fraction or an exponent ("2.0", not "2"), so a client decoding Corrosion's
// SqliteValue reads a REAL back, not an INTEGER.
type sqlReal float64

// MarshalJSON writes the shortest round-tripping form: plain decimal for
// 1e-5 <= |x| < 1e16, otherwise mantissa and exponent ("1e16", "1.5e-7").
func (r sqlReal) MarshalJSON() ([]byte, error) {
	f := float64(r)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return []byte("null"), nil // serde_json writes non-finite floats as null
	}
	if a := math.Abs(f); a == 0 || (a >= 1e-5 && a < 1e16) {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return []byte(s), nil
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
	if neg {
		exp = "-" + exp
	}
	return []byte(mant + "e" + exp), nil
}

func namedArg(name string, v any) any { return sql.Named(name, v) }
