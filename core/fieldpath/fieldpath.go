package fieldpath

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Locate returns the path of the first value in data (sorted by key, then
// index) that does not decode into the matching part of v's type, or ""
// when data is not an object or array of that shape or every part decodes
// on its own. v is the value (or a pointer to it) the caller decoded into.
func Locate(data []byte, v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return ""
	}
	return strings.TrimPrefix(locate(data, t), ".")
}

func locate(data []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if custom(t) {
		return "" // the type decodes itself: the caller's key is the field
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return ""
		}
		for _, k := range sortedKeys(obj) {
			f, ok := field(t, k)
			if !ok {
				continue // unknown fields are ignored by the decoder too
			}
			if p, bad := check(obj[k], f.Type); bad {
				return "." + k + p
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil {
			return ""
		}
		for _, k := range sortedKeys(obj) {
			if p, bad := check(obj[k], t.Elem()); bad {
				return "." + k + p
			}
		}
	case reflect.Slice, reflect.Array:
		var arr []json.RawMessage
		if json.Unmarshal(data, &arr) != nil {
			return ""
		}
		for i, raw := range arr {
			if p, bad := check(raw, t.Elem()); bad {
				return "[" + strconv.Itoa(i) + "]" + p
			}
		}
	}
	return ""
}

// check reports whether raw fails to decode into t, and where inside it.
func check(raw json.RawMessage, t reflect.Type) (string, bool) {
	if json.Unmarshal(raw, reflect.New(t).Interface()) == nil {
		return "", false
	}
	return locate(raw, t), true
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
)

func custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// field finds the struct field encoding/json would fill for key: an exact
// name first, then a case-insensitive one, through embedded structs.
func field(t reflect.Type, key string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f, true
		}
		if !found && strings.EqualFold(name, key) {
			fold, found = f, true
		}
	}
	return fold, found
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
