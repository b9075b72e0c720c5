package dockerlog

import (
	"encoding/binary"
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxFrame bounds one record's message. Docker splits output into records
// of at most 16 KiB and refuses messages over 1 MB; anything larger is not
// a frame but corrupt bytes.
const MaxFrame = 2 << 20

// Entry is one record of the local driver.
type Entry struct {
	Source   string // "stdout" or "stderr"
	TimeNano int64
	Line     []byte // without its trailing newline
	// Partial says the line goes on in a later record of the same source;
	// Last (with partial metadata) says this record ends a partial line.
	Partial   bool
	Last      bool
	PartialID string
	Ordinal   int32
}

// Complete reports whether e ends a line.
func (e Entry) Complete() bool { return !e.Partial || e.Last }

// Decode reads the frames in buf. It returns the entries, how many bytes
// of buf it consumed, and how many of those were corrupt (skipped). A
// frame cut short at the end of buf is left unconsumed unless atEOF says
// no more bytes will come (the file was rotated away or removed), in which
// case its bytes are corrupt too. Entries' Line aliases buf.
func Decode(buf []byte, atEOF bool) (entries []Entry, consumed, corrupt int) {
	pos := 0
	for pos < len(buf) {
		rest := buf[pos:]
		if len(rest) < 4 {
			if atEOF {
				corrupt += len(rest)
				pos = len(buf)
			}
			break
		}
		size := int(binary.BigEndian.Uint32(rest))
		if size == 0 || size > MaxFrame {
			corrupt++
			pos++
			continue
		}
		if len(rest) < 8+size {
			if !atEOF {
				break
			}
			corrupt++
			pos++
			continue
		}
		if int(binary.BigEndian.Uint32(rest[4+size:])) != size {
			corrupt++
			pos++
			continue
		}
		e, err := parseEntry(rest[4 : 4+size])
		if err != nil {
			corrupt++
			pos++
			continue
		}
		entries = append(entries, e)
		pos += 8 + size
	}
	return entries, pos, corrupt
}

var errNotEntry = errors.New("not a local-driver log entry")

// parseEntry decodes one LogEntry message. A message without a source of
// stdout or stderr, or without a time, is not an entry: requiring both
// keeps a resynchronising reader from taking random bytes for a frame.
func parseEntry(b []byte) (Entry, error) {
	var e Entry
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e, errNotEntry
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return e, errNotEntry
			}
			e.Source, b = string(v), b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return e, errNotEntry
			}
			e.TimeNano, b = int64(v), b[n:]
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return e, errNotEntry
			}
			e.Line, b = v, b[n:]
		case num == 4 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return e, errNotEntry
			}
			e.Partial, b = v != 0, b[n:]
		case num == 5 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || parseMeta(v, &e) != nil {
				return e, errNotEntry
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return e, errNotEntry
			}
			b = b[n:]
		}
	}
	if (e.Source != "stdout" && e.Source != "stderr") || e.TimeNano <= 0 {
		return e, errNotEntry
	}
	return e, nil
}

func parseMeta(b []byte, e *Entry) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errNotEntry
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errNotEntry
			}
			e.Last, b = v != 0, b[n:]
		case num == 2 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errNotEntry
			}
			e.PartialID, b = string(v), b[n:]
		case num == 3 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return errNotEntry
			}
			e.Ordinal, b = int32(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errNotEntry
			}
			b = b[n:]
		}
	}
	return nil
}

// Encode frames e as the local driver does; tests and benchmarks write
// files with it.
func Encode(dst []byte, e Entry) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.BytesType)
	m = protowire.AppendString(m, e.Source)
	m = protowire.AppendTag(m, 2, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(e.TimeNano))
	if len(e.Line) > 0 {
		m = protowire.AppendTag(m, 3, protowire.BytesType)
		m = protowire.AppendBytes(m, e.Line)
	}
	if e.Partial {
		m = protowire.AppendTag(m, 4, protowire.VarintType)
		m = protowire.AppendVarint(m, 1)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(m)))
	dst = append(dst, m...)
	return binary.BigEndian.AppendUint32(dst, uint32(len(m)))
}
