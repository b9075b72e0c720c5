package dns

import (
	"encoding/binary"
	"net/netip"
	"unsafe"
)

// The hot path answers the common query, one question for a name under
// .internal, straight from its wire bytes into a reused buffer: no
// message is unpacked or packed and nothing is allocated. Anything else
// (forwarded names, PTR, other opcodes or classes, EDNS versions other
// than 0, compression or trailing bytes in a query) returns ok false and
// takes the general path (Handler.AnswerFrom), which answers the same
// queries the same way; TestWireMatchesGeneralPath holds them to it.

// wireScratch is one worker's reused memory.
type wireScratch struct {
	name [256]byte
	ips  [64]netip.Addr
	out  []byte
	rot  uint64
}

const (
	flagQR = 1 << 15
	flagAA = 1 << 10
	flagTC = 1 << 9
	flagRD = 1 << 8
	flagRA = 1 << 7
	flagCD = 1 << 4

	typeA   = 1
	typeOPT = 41
	typeANY = 255
	classIN = 1
)

// answerWire returns the response to the query q from src, or ok false
// when the general path must answer it. The result aliases s.out.
func (h *Handler) answerWire(q []byte, src netip.Addr, s *wireScratch) (resp []byte, ok bool) {
	t := h.table.Load()
	if t == nil || len(q) < 12+5 {
		return nil, false
	}
	flags := binary.BigEndian.Uint16(q[2:])
	// A query (QR 0), opcode QUERY, not truncated; one question, no
	// answer or authority records, at most one additional (OPT).
	if flags&(flagQR|0x7800|flagTC) != 0 || binary.BigEndian.Uint16(q[4:]) != 1 ||
		binary.BigEndian.Uint16(q[6:]) != 0 || binary.BigEndian.Uint16(q[8:]) != 0 {
		return nil, false
	}
	arcount := binary.BigEndian.Uint16(q[10:])
	if arcount > 1 {
		return nil, false
	}
	// The question name, lowercased into s.name as dotted text.
	off, n := 12, 0
	for {
		if off >= len(q) {
			return nil, false
		}
		l := int(q[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(q) || n+l+1 > len(s.name) {
			return nil, false // a compression pointer, or too long
		}
		for _, c := range q[off : off+l] {
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case c == '.' || c < '!' || c > '~':
				return nil, false // not a plain host name: let miekg escape it
			}
			s.name[n] = c
			n++
		}
		s.name[n] = '.'
		n++
		off += l
	}
	if n == 0 || off+4 > len(q) {
		return nil, false
	}
	qend := off + 4
	qtype, qclass := binary.BigEndian.Uint16(q[off:]), binary.BigEndian.Uint16(q[off+2:])
	if qclass != classIN && qclass != typeANY {
		return nil, false
	}
	// An OPT record (EDNS0) as the only additional record.
	edns, do, size := false, false, 512
	if arcount == 1 {
		o := q[qend:]
		if len(o) < 11 || o[0] != 0 || binary.BigEndian.Uint16(o[1:]) != typeOPT || o[6] != 0 ||
			11+int(binary.BigEndian.Uint16(o[9:])) != len(o) {
			return nil, false // not OPT, a version other than 0, or trailing bytes
		}
		edns, do = true, o[7]&0x80 != 0
		size = max(int(binary.BigEndian.Uint16(o[3:])), 512)
	} else if qend != len(q) {
		return nil, false
	}
	// The name string aliases s.name only for this query: nothing keeps it.
	name := ParseName(unsafe.String(&s.name[0], n))
	switch name.Kind {
	case NameExternal, NameReverse:
		return nil, false
	case NameShort:
		name = shortName(t, name, src)
	}
	v := h.view.Load()
	s.rot++
	ips, found := t.AppendLookup(s.ips[:0], name, v.machine, v.subnet, s.rot)
	rcode := uint16(0)
	if !found {
		rcode = 3 // NXDOMAIN
		ips = ips[:0]
	} else if qtype != typeA && qtype != typeANY {
		ips = ips[:0] // the name exists, it has no record of this type
	}

	out := append(s.out[:0], q[:qend]...)
	out[2], out[3] = 0, 0
	binary.BigEndian.PutUint16(out[2:], flagQR|flagAA|flagRA|flags&(flagRD|flagCD)|rcode)
	optLen := 0
	if edns {
		optLen = 11
	}
	fit := ips
	if len(out)+16*len(ips)+optLen > size {
		fit = ips[:max(0, (size-len(out)-optLen)/16)]
		binary.BigEndian.PutUint16(out[2:], flagQR|flagAA|flagRA|flagTC|flags&(flagRD|flagCD)|rcode)
	}
	binary.BigEndian.PutUint16(out[6:], uint16(len(fit)))
	binary.BigEndian.PutUint16(out[8:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	for _, ip := range fit {
		a := ip.As4()
		// Owner: a pointer to the question name at offset 12; A, IN, TTL 0, 4 bytes.
		out = append(out, 0xC0, 12, 0, typeA, 0, classIN, 0, 0, 0, 0, 0, 4, a[0], a[1], a[2], a[3])
	}
	if edns {
		var dob byte
		if do {
			dob = 0x80
		}
		out = append(out, 0, 0, typeOPT, byte(ednsSize>>8), byte(ednsSize&0xff), 0, 0, dob, 0, 0, 0)
		binary.BigEndian.PutUint16(out[10:], 1)
	}
	s.out = out
	return out, true
}
