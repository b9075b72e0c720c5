// Package fieldpath finds which field of a JSON document a Go type
// refuses, so a decoder's error can name it (peers[0].subnet) even when
// encoding/json does not: a value's own UnmarshalText or UnmarshalJSON
// error (netip.Prefix, time.Duration wrappers) carries no field, and a
// type error names the field without its index.
package fieldpath
