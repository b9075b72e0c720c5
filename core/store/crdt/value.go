// Package crdt keeps replicated SQLite tables convergent: it captures local
// writes as versioned changesets and merges remote ones with cr-sqlite's
// rules (causal length per row, then per-column last-writer-wins decided by
// column version, value and site id).
package crdt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is the SQLite storage class of a Value.
type Kind uint8

// Storage classes in SQLite's own sort order: NULL < numbers < TEXT < BLOB.
const (
	KindNull Kind = iota
	KindInt
	KindFloat
	KindText
	KindBlob
)

// Value is one SQLite cell value, typed so it survives a round trip through
// the wire encoding without losing its storage class.
type Value struct {
	K Kind
	I int64
	F float64
	S string
	B []byte
}

// FromAny converts a value returned by the SQLite driver into a Value.
func FromAny(v any) Value {
	switch x := v.(type) {
	case nil:
		return Value{K: KindNull}
	case int64:
		return Value{K: KindInt, I: x}
	case int:
		return Value{K: KindInt, I: int64(x)}
	case float64:
		return Value{K: KindFloat, F: x}
	case bool:
		if x {
			return Value{K: KindInt, I: 1}
		}
		return Value{K: KindInt}
	case string:
		return Value{K: KindText, S: x}
	case []byte:
		return Value{K: KindBlob, B: append([]byte(nil), x...)}
	case time.Time:
		// The driver parses DATETIME-declared text; store it back as text.
		return Value{K: KindText, S: x.Format("2006-01-02 15:04:05.999999999-07:00")}
	default:
		return Value{K: KindText, S: fmt.Sprint(x)}
	}
}

// Any returns the value in the form the SQLite driver binds.
func (v Value) Any() any {
	switch v.K {
	case KindInt:
		return v.I
	case KindFloat:
		return v.F
	case KindText:
		return v.S
	case KindBlob:
		return v.B
	default:
		return nil
	}
}

// Compare orders two values the way SQLite's default (BINARY) collation
// does, which is the tie-break cr-sqlite uses between equal column versions.
func Compare(a, b Value) int {
	ra, rb := rank(a.K), rank(b.K)
	if ra != rb {
		return cmpInt(int64(ra), int64(rb))
	}
	switch ra {
	case 0:
		return 0
	case 1:
		if a.K == KindInt && b.K == KindInt {
			return cmpInt(a.I, b.I)
		}
		fa, fb := a.num(), b.num()
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	case 2:
		return strings.Compare(a.S, b.S)
	default:
		return bytes.Compare(a.B, b.B)
	}
}

func (v Value) num() float64 {
	if v.K == KindInt {
		return float64(v.I)
	}
	return v.F
}

func rank(k Kind) int {
	switch k {
	case KindNull:
		return 0
	case KindInt, KindFloat:
		return 1
	case KindText:
		return 2
	default:
		return 3
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// decodePK turns a canonical primary key (a JSON array made by SQLite's
// json_array) into driver values, keeping integers and reals apart.
func decodePK(pk string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(pk))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode primary key %s: %w", pk, err)
	}
	for i, r := range raw {
		if n, ok := r.(json.Number); ok {
			if iv, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				raw[i] = iv
			} else if fv, err := n.Float64(); err == nil {
				raw[i] = fv
			} else {
				return nil, fmt.Errorf("primary key %s: bad number %s", pk, n)
			}
		}
	}
	return raw, nil
}
