package crdt

import (
	"crypto/sha256"
	"encoding/binary"
	"sort"
)

// Range is an inclusive range of origin versions.
type Range struct{ Lo, Hi int64 }

// Book records, per origin site, which versions have been applied. Versions
// of one site are contiguous at the origin, so holes are gaps to pull.
type Book map[string][]Range

// Has reports whether every version in [lo, hi] of site is recorded.
func (b Book) Has(site string, lo, hi int64) bool {
	for _, r := range b[site] {
		if r.Lo <= lo && hi <= r.Hi {
			return true
		}
	}
	return false
}

// Add records [lo, hi] for site, merging adjacent ranges.
func (b Book) Add(site string, lo, hi int64) {
	rs := append(b[site], Range{lo, hi})
	sort.Slice(rs, func(i, j int) bool { return rs[i].Lo < rs[j].Lo })
	out := rs[:0:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi+1 {
			if r.Hi > out[n-1].Hi {
				out[n-1].Hi = r.Hi
			}
			continue
		}
		out = append(out, r)
	}
	b[site] = out
}

// Head is the highest version of site below which nothing is missing.
func (b Book) Head(site string) int64 {
	rs := b[site]
	if len(rs) == 0 || rs[0].Lo != 1 {
		return 0
	}
	return rs[0].Hi
}

// Max is the highest version of site recorded.
func (b Book) Max(site string) int64 {
	rs := b[site]
	if len(rs) == 0 {
		return 0
	}
	return rs[len(rs)-1].Hi
}

// Gaps counts versions missing below each site's highest known version.
func (b Book) Gaps() int64 {
	var n int64
	for site, rs := range b {
		n += b.Max(site) - b.covered(rs)
	}
	return n
}

func (b Book) covered(rs []Range) int64 {
	var n int64
	for _, r := range rs {
		n += r.Hi - r.Lo + 1
	}
	return n
}

// Missing returns the ranges other holds for site that b lacks.
func (b Book) Missing(other Book, site string) []Range {
	var out []Range
	for _, r := range other[site] {
		cur := r.Lo
		for _, mine := range b[site] {
			if mine.Hi < cur || mine.Lo > r.Hi {
				continue
			}
			if mine.Lo > cur {
				out = append(out, Range{cur, mine.Lo - 1})
			}
			cur = mine.Hi + 1
			if cur > r.Hi {
				break
			}
		}
		if cur <= r.Hi {
			out = append(out, Range{cur, r.Hi})
		}
	}
	return out
}

// Clone returns a deep copy.
func (b Book) Clone() Book {
	out := make(Book, len(b))
	for k, v := range b {
		out[k] = append([]Range(nil), v...)
	}
	return out
}

// Vector returns each site's head: the per-site db version vector.
func (b Book) Vector() map[string]int64 {
	out := make(map[string]int64, len(b))
	for site := range b {
		out[site] = b.Head(site)
	}
	return out
}

// Clip drops every version of site above hi.
func (b Book) Clip(site string, hi int64) {
	var out []Range
	for _, r := range b[site] {
		if r.Lo > hi {
			break
		}
		if r.Hi > hi {
			r.Hi = hi
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		delete(b, site)
		return
	}
	b[site] = out
}

// Digest is a hash of every version the book records, the same for any
// two books that record the same versions: peers compare digests before
// sending whole books.
func (b Book) Digest() []byte {
	sites := make([]string, 0, len(b))
	for site, rs := range b {
		if len(rs) > 0 {
			sites = append(sites, site)
		}
	}
	sort.Strings(sites)
	h := sha256.New()
	var buf []byte
	for _, site := range sites {
		buf = binary.AppendUvarint(buf[:0], uint64(len(site)))
		buf = append(buf, site...)
		buf = binary.AppendUvarint(buf, uint64(len(b[site])))
		for _, r := range b[site] {
			buf = binary.AppendVarint(binary.AppendVarint(buf, r.Lo), r.Hi)
		}
		h.Write(buf)
	}
	return h.Sum(nil)[:16]
}
