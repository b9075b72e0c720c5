package crdt

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"strings"
)

// The version high-water mark lives in a small file next to the database
// (<db>-version). Before a local version leaves this node (broadcast or a
// sync answer) the mark is raised to it and fsynced. The database itself
// runs synchronous=NORMAL, so power loss may roll back the tail of the WAL;
// on open the engine never hands out a version at or below the mark again,
// and it takes back its own lost versions from peers that hold them. The
// alternative, synchronous=FULL, pays an fsync inside every commit while
// the write lock is held; BenchmarkDurability measures both.

// hwmRecord is the fixed size of the mark file: one write of it stays
// inside one disk sector, so a torn write cannot leave half a record.
const hwmRecord = 64

type hwmFile struct {
	f    *os.File
	path string
}

func hwmPath(dbPath string) string { return dbPath + "-version" }

// openHWM opens (creating 0600) the mark file and returns the version it
// holds for site, 0 when empty or written by another site.
func openHWM(dbPath, site string) (*hwmFile, int64, error) {
	p := hwmPath(dbPath)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("open version mark %s: %w", p, err)
	}
	h := &hwmFile{f: f, path: p}
	buf := make([]byte, hwmRecord)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, 0, fmt.Errorf("read version mark %s: %w", p, err)
	}
	if n == 0 {
		return h, 0, nil
	}
	s, v, err := parseHWM(buf[:n])
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("version mark %s: %w", p, err)
	}
	if s != site {
		return h, 0, nil
	}
	return h, v, nil
}

func formatHWM(site string, v int64) []byte {
	body := site + " " + strconv.FormatInt(v, 10)
	line := body + " " + strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 16)
	buf := []byte(line + "\n")
	for len(buf) < hwmRecord {
		buf = append(buf, ' ')
	}
	return buf
}

func parseHWM(b []byte) (string, int64, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return "", 0, fmt.Errorf("malformed record %q", strings.TrimSpace(string(b)))
	}
	body := f[0] + " " + f[1]
	sum, err := strconv.ParseUint(f[2], 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE([]byte(body)) {
		return "", 0, fmt.Errorf("checksum mismatch in record %q", strings.TrimSpace(string(b)))
	}
	v, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || v < 0 {
		return "", 0, fmt.Errorf("bad version %q", f[1])
	}
	return f[0], v, nil
}

func (h *hwmFile) write(site string, v int64) error {
	rec := formatHWM(site, v)
	if len(rec) > hwmRecord {
		return fmt.Errorf("version mark record for site %s is %d bytes, over %d", site, len(rec), hwmRecord)
	}
	if _, err := h.f.WriteAt(rec, 0); err != nil {
		return fmt.Errorf("write version mark %s: %w", h.path, err)
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("sync version mark %s: %w", h.path, err)
	}
	return nil
}

// initDurability makes what the database holds at open durable, then
// starts the version counter above both it and the mark.
func (e *Engine) initDurability(ctx context.Context, dbPath string) error {
	if e.mode == SyncFull {
		e.durable.Store(e.version)
		return nil
	}
	// What survived the restart may still sit unsynced in the WAL; a
	// checkpoint syncs it so versions in the book are safe to serve.
	if _, err := e.w.ExecContext(ctx, `PRAGMA wal_checkpoint(FULL)`); err != nil {
		return fmt.Errorf("checkpoint %s at open: %w", dbPath, err)
	}
	h, mark, err := openHWM(dbPath, e.site)
	if err != nil {
		return err
	}
	e.hwm = h
	if mark > e.version {
		e.log.Warn("database lost versions this node had already shared (power loss or restored files); skipping past them and taking them back from peers",
			"site", e.site, "book_max", e.version, "mark", mark)
		e.version = mark
	}
	if err := h.write(e.site, e.version); err != nil {
		return err
	}
	e.durable.Store(e.version)
	return nil
}

// MarkShared records, durably, that local versions up to v may leave this
// node. Callers raise it before broadcasting v; sync answers never include
// local versions above it.
func (e *Engine) MarkShared(v int64) error {
	e.hwmMu.Lock()
	defer e.hwmMu.Unlock()
	if v <= e.durable.Load() {
		return nil
	}
	if e.hwm != nil {
		if err := e.hwm.write(e.site, v); err != nil {
			return err
		}
	}
	e.durable.Store(v)
	return nil
}

// Shared is the highest local version that may leave this node.
func (e *Engine) Shared() int64 { return e.durable.Load() }
