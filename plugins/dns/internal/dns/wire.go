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

	// EDNS0 option codes the hot path passes through (RFC 5001, 7873, 7830).
	optNSID    = 3
	optCookie  = 10
	optPadding = 12
	typeANY    = 255
	classIN    = 1
)

// wireQuery is what the hot path reads of a query.
type wireQuery struct {
	flags, qtype uint16
	qend         int // end of the question section
	nameLen      int // bytes of the dotted name in wireScratch.name
	edns, do     bool
	size         int // the largest response the client takes over UDP
}

// answerWire returns the response to the query q from src, or ok false
// when the general path must answer it. The result aliases s.out.
func (h *Handler) answerWire(q []byte, src netip.Addr, s *wireScratch) (resp []byte, ok bool) {
	t := h.table.Load()
	if t == nil {
		return nil, false
	}
	wq, ok := parseWireQuery(q, s)
	if !ok {
		return nil, false
	}
	// The name string aliases s.name only for this query: nothing keeps it.
	name := ParseName(unsafe.String(&s.name[0], wq.nameLen))
	if name.Kind == NameExternal || name.Kind == NameReverse {
		return nil, false
	}
	v := h.view.Load()
	s.rot++
	ips, found := resolve(s.ips[:0], t, v, name, src, s.rot)
	rcode := uint16(0)
	if !found {
		rcode = 3 // NXDOMAIN
		ips = ips[:0]
	} else if wq.qtype != typeA && wq.qtype != typeANY {
		ips = ips[:0] // the name exists, it has no record of this type
	}
	s.out = writeWireAnswer(s.out[:0], q, wq, ips, rcode)
	return s.out, true
}

// parseWireQuery checks q is a query the hot path answers and reads its
// question name, lowercased, into s.name as dotted text.
func parseWireQuery(q []byte, s *wireScratch) (wq wireQuery, ok bool) {
	if len(q) < 12+5 {
		return wq, false
	}
	wq.flags = binary.BigEndian.Uint16(q[2:])
	// A query (QR 0), opcode QUERY, not truncated; one question, no
	// answer or authority records, at most one additional (OPT).
	if wq.flags&(flagQR|0x7800|flagTC) != 0 || binary.BigEndian.Uint16(q[4:]) != 1 ||
		binary.BigEndian.Uint16(q[6:]) != 0 || binary.BigEndian.Uint16(q[8:]) != 0 {
		return wq, false
	}
	arcount := binary.BigEndian.Uint16(q[10:])
	if arcount > 1 {
		return wq, false
	}
	off, n, ok := readWireName(q, s)
	if !ok || n == 0 || off+4 > len(q) {
		return wq, false
	}
	wq.nameLen, wq.qend = n, off+4
	wq.qtype = binary.BigEndian.Uint16(q[off:])
	if qclass := binary.BigEndian.Uint16(q[off+2:]); qclass != classIN && qclass != typeANY {
		return wq, false
	}
	wq.size = 512
	if arcount == 0 {
		return wq, wq.qend == len(q)
	}
	// An OPT record (EDNS0) as the only additional record.
	o := q[wq.qend:]
	if len(o) < 11 || o[0] != 0 || binary.BigEndian.Uint16(o[1:]) != typeOPT || o[6] != 0 ||
		11+int(binary.BigEndian.Uint16(o[9:])) != len(o) {
		return wq, false // not OPT, a version other than 0, or trailing bytes
	}
	if !plainOptions(o[11:]) {
		return wq, false // the general path reads (or refuses) the rest
	}
	wq.edns, wq.do = true, o[7]&0x80 != 0
	wq.size = max(int(binary.BigEndian.Uint16(o[3:])), 512)
	return wq, true
}

// plainOptions reports whether rdata is a well-formed run of EDNS0
// options whose bodies the general path reads without checks of its own:
// a cookie, padding or NSID. Anything else (client subnet, keepalive,
// truncated option headers) goes to the general path, so the hot path
// never answers bytes the general path would refuse.
func plainOptions(rdata []byte) bool {
	for len(rdata) > 0 {
		if len(rdata) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(rdata), int(binary.BigEndian.Uint16(rdata[2:]))
		if 4+n > len(rdata) {
			return false
		}
		switch code {
		case optNSID, optCookie, optPadding:
		default:
			return false
		}
		rdata = rdata[4+n:]
	}
	return true
}

// readWireName reads the question name at offset 12 into s.name,
// returning the offset after it and its length; ok is false for a
// compression pointer, a name too long, or a label that is not a plain
// host name (the general path escapes those).
func readWireName(q []byte, s *wireScratch) (off, n int, ok bool) {
	off = 12
	for {
		if off >= len(q) {
			return 0, 0, false
		}
		l := int(q[off])
		off++
		if l == 0 {
			return off, n, true
		}
		if l > 63 || off+l > len(q) || n+l+1 > len(s.name) {
			return 0, 0, false
		}
		for _, c := range q[off : off+l] {
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case c == '.' || c < '!' || c > '~':
				return 0, 0, false
			}
			s.name[n] = c
			n++
		}
		s.name[n] = '.'
		n++
		off += l
	}
}

// writeWireAnswer appends to out the response: q's header and question,
// one A record per address that fits the client's size (TC set when not
// all do), and an OPT record when the query had one.
func writeWireAnswer(out, q []byte, wq wireQuery, ips []netip.Addr, rcode uint16) []byte {
	out = append(out, q[:wq.qend]...)
	flags := flagQR | flagAA | flagRA | wq.flags&(flagRD|flagCD) | rcode
	optLen := 0
	if wq.edns {
		optLen = 11
	}
	fit := ips
	if len(out)+16*len(ips)+optLen > wq.size {
		fit = ips[:max(0, (wq.size-len(out)-optLen)/16)]
		flags |= flagTC
	}
	binary.BigEndian.PutUint16(out[2:], flags)
	binary.BigEndian.PutUint16(out[6:], uint16(len(fit)))
	binary.BigEndian.PutUint16(out[8:], 0)
	binary.BigEndian.PutUint16(out[10:], 0)
	for _, ip := range fit {
		a := ip.As4()
		// Owner: a pointer to the question name at offset 12; A, IN, TTL 0, 4 bytes.
		out = append(out, 0xC0, 12, 0, typeA, 0, classIN, 0, 0, 0, 0, 0, 4, a[0], a[1], a[2], a[3])
	}
	if wq.edns {
		var dob byte
		if wq.do {
			dob = 0x80
		}
		out = append(out, 0, 0, typeOPT, byte(ednsSize>>8), byte(ednsSize&0xff), 0, 0, dob, 0, 0, 0)
		binary.BigEndian.PutUint16(out[10:], 1)
	}
	return out
}
