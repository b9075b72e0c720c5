package logstore

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A Container's lines of one hour are kept in chunks of about chunkBytes:
// hours/<hour>/<container id>.<unix nano of its first line>.seg. Chunks
// let retention delete the oldest part of an hour a flooding Container
// filled, and let a query for the newest lines read only the last chunks.
// A file named <container id>.seg (the first layout) is one chunk that
// starts with its hour.

// Chunk sizes: a spec's budget sets one between these bounds (a
// sixteenth of the budget), so retention deletes in small steps.
const (
	defaultChunkBytes = 4 << 20
	minChunkBytes     = 64 << 10
	maxChunkBytes     = 8 << 20
)

// ChunkBytesFor is the chunk size for a budget of maxBytes.
func ChunkBytesFor(maxBytes int64) int {
	if maxBytes <= 0 {
		return defaultChunkBytes
	}
	return int(min(max(maxBytes/16, minChunkBytes), maxChunkBytes))
}

// openChunk is the chunk a Container's next lines go to.
type openChunk struct {
	hour  string
	first int64
	size  int
}

// chunk is one chunk file on disk.
type chunk struct {
	hour, id, name string
	first          int64
	size, modNano  int64
	// next is the first line's time of the Container's next chunk in the
	// same hour, 0 for its newest chunk.
	next int64
}

func chunkName(id string, first int64) string {
	return id + "." + strconv.FormatInt(first, 10) + ".seg"
}

// parseChunk reads a chunk's file name; hourStart is the start of its hour.
func parseChunk(name string, hourStart int64) (id string, first int64, ok bool) {
	base, ok := strings.CutSuffix(name, ".seg")
	if !ok {
		return "", 0, false
	}
	id, ts, dotted := strings.Cut(base, ".")
	if !dotted {
		return id, hourStart, id != ""
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	return id, n, err == nil && id != ""
}

// upper bounds the times of the lines in c: its Container's next chunk
// starts after them; the newest chunk ends with its hour.
func (c chunk) upper() int64 {
	if c.next != 0 {
		return c.next
	}
	start, _ := time.ParseInLocation(hourLayout, c.hour, time.UTC)
	return start.Add(time.Hour).UnixNano()
}

// lastWrite is when c was last written to (a newer line than any in it
// cannot be older): its Container's next chunk's start, or its mtime.
func (c chunk) lastWrite() int64 {
	if c.next != 0 {
		return c.next
	}
	return min(c.modNano, c.upper())
}

// chunks lists the chunks of hour h.
func (s *Store) chunks(h string) ([]chunk, error) {
	dir := filepath.Join(s.dir, "hours", h)
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil // deleted by retention meanwhile
	}
	if err != nil {
		return nil, err
	}
	start, _ := time.ParseInLocation(hourLayout, h, time.UTC)
	var out []chunk
	for _, e := range es {
		id, first, ok := parseChunk(e.Name(), start.UnixNano())
		if !ok {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		out = append(out, chunk{hour: h, id: id, name: e.Name(), first: first, size: fi.Size(), modNano: fi.ModTime().UnixNano()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].id != out[j].id {
			return out[i].id < out[j].id
		}
		return out[i].first < out[j].first
	})
	for i := 0; i+1 < len(out); i++ {
		if out[i].id == out[i+1].id {
			out[i].next = out[i+1].first
		}
	}
	return out, nil
}

func (c chunk) path(dir string) string { return filepath.Join(dir, "hours", c.hour, c.name) }
