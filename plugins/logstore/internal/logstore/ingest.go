package logstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/internal/fsutil"
	"github.com/ployz/ployz/plugins/internal/obsfs"
	"github.com/ployz/ployz/plugins/logstore/internal/dockerlog"
)

// Container labels ployzd sets (core/rpc's Label* names; the plugin reads
// them from Docker's own files, not from the daemon).
const (
	labelNamespace  = "ployz.namespace"
	labelService    = "ployz.service"
	labelDeployment = "ployz.deployment"
)

const (
	// readChunk bounds what one poll reads of one file, so a flooding
	// Container cannot starve the others.
	readChunk = 4 << 20
	// partialFlushAfter: a line Docker left partial (a last line without
	// a newline) is stored once no more output came for this long.
	partialFlushAfter = 2 * time.Second
	// recheckAfter: a Container without local-driver files (another log
	// driver) is looked at again after this long.
	recheckAfter = 30 * time.Second
	// notStartedRecheck: a Ployz Container without its log file yet is
	// looked at again this soon, so its first lines are not missed.
	notStartedRecheck = time.Second
)

// Cursor is how far a Docker log file was read: the file (by inode) and
// the offset of the first byte not yet stored.
type Cursor struct {
	Inode    uint64 `json:"inode"`
	Offset   int64  `json:"offset"`
	LastTime int64  `json:"last_unix_nano,omitempty"`
}

// Ingester copies the output of this Machine's Ployz Containers from
// Docker's local-driver files into the Store.
type Ingester struct {
	root  string // Docker's containers directory
	store *Store
	log   hclog.Logger
	now   func() time.Time

	tails   map[string]*tail
	skip    map[string]time.Time
	cursors map[string]Cursor
	curPath string
	saved   []byte // the cursors as last written to curPath
	corrupt atomic.Uint64
	lines   atomic.Uint64
}

type tail struct {
	meta     Container
	path     string
	f        *os.File
	ino      uint64
	off      int64 // bytes of f read into pend
	pend     []byte
	asm      dockerlog.Assembler
	lastData time.Time
	skipTo   int64 // lines at or before this were stored by an earlier process
	lastTime int64
}

// NewIngester reads Docker's files under dockerRoot/containers.
func NewIngester(dockerRoot string, s *Store, log hclog.Logger) *Ingester {
	in := &Ingester{root: filepath.Join(dockerRoot, "containers"), store: s, log: log, now: time.Now,
		tails: map[string]*tail{}, skip: map[string]time.Time{}, cursors: map[string]Cursor{},
		curPath: filepath.Join(s.Dir(), "cursors.json")}
	if err := obsfs.LoadJSON(in.curPath, &in.cursors); err != nil {
		log.Warn("cursors unreadable; reading Docker's files from their start", "error", err)
		in.cursors = map[string]Cursor{}
	}
	return in
}

// Corrupt is the count of bytes of Docker's files skipped as corrupt.
func (in *Ingester) Corrupt() uint64 { return in.corrupt.Load() }

// Lines is the count of lines stored since start.
func (in *Ingester) Lines() uint64 { return in.lines.Load() }

// Close closes the files held open.
func (in *Ingester) Close() {
	for _, t := range in.tails {
		t.f.Close()
	}
}

// Poll runs one ingest cycle: find new Containers, read what their files
// gained, notice rotation and removal, store, and save the cursors.
func (in *Ingester) Poll() error {
	now := in.now()
	in.discover(now)
	for id, t := range in.tails {
		in.readMore(t, false)
		switch gone, rotated := in.checkFile(t); {
		case gone:
			// Docker removed the Container; its open file still reads.
			in.readMore(t, true)
			in.store.Append(t.meta, t.asm.Flush())
			in.store.MarkRemoved(id, now)
			t.f.Close()
			delete(in.tails, id)
			delete(in.cursors, id)
			in.log.Debug("container removed; its output is kept", "container", id)
		case rotated:
			in.readMore(t, true) // the rest of the rotated file
			if err := in.open(t, Cursor{}); err != nil {
				in.log.Warn("reopen rotated log", "container", id, "error", err)
			}
		}
		if t.asm.Pending() && now.Sub(t.lastData) > partialFlushAfter {
			in.store.Append(t.meta, t.asm.Flush())
		}
		if in.tails[id] != nil {
			in.cursors[id] = Cursor{Inode: t.ino, Offset: t.off - int64(len(t.pend)), LastTime: t.lastTime}
		}
	}
	errs := []error{in.store.Flush()}
	if err := in.saveCursors(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// saveCursors writes the cursors when they differ from the last write:
// at rest nothing moves, and a durable write (fsync, rename, fsync of
// the directory) twice a second was most of what an idle plugin spent.
func (in *Ingester) saveCursors() error {
	b, err := json.Marshal(in.cursors) // map keys sorted: equal cursors, equal bytes
	if err != nil {
		return fmt.Errorf("encode cursors: %w", err)
	}
	if in.saved != nil && bytes.Equal(b, in.saved) {
		return nil
	}
	if err := fsutil.WriteFileAtomic(in.curPath, b, 0o600); err != nil {
		return fmt.Errorf("save cursors: %w", err)
	}
	in.saved = b
	return nil
}

// dockerConfig is the part of Docker's config.v2.json the plugin reads.
type dockerConfig struct {
	ID     string `json:"ID"`
	Name   string `json:"Name"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

func (in *Ingester) discover(now time.Time) {
	es, err := os.ReadDir(in.root)
	if err != nil {
		in.log.Debug("docker containers directory unreadable", "dir", in.root, "error", err)
		return
	}
	for _, e := range es {
		id := e.Name()
		if in.tails[id] != nil || !e.IsDir() {
			continue
		}
		if until, ok := in.skip[id]; ok && now.Before(until) {
			continue
		}
		var cfg dockerConfig
		b, err := os.ReadFile(filepath.Join(in.root, id, "config.v2.json"))
		if err != nil || json.Unmarshal(b, &cfg) != nil {
			// Docker makes the directory before it writes the config:
			// look again soon rather than miss a Container's first lines.
			in.skip[id] = now.Add(notStartedRecheck)
			continue
		}
		if cfg.Config.Labels[labelNamespace] == "" {
			in.skip[id] = now.Add(recheckAfter) // not a Ployz Container
			continue
		}
		l := cfg.Config.Labels
		t := &tail{meta: Container{ID: id, Name: strings.TrimPrefix(cfg.Name, "/"), Namespace: l[labelNamespace],
			Service: l[labelService], Deployment: l[labelDeployment]},
			path: filepath.Join(in.root, id, "local-logs", "container.log"), lastData: now}
		cur, had := in.cursors[id]
		if err := in.open(t, cur); err != nil {
			if os.IsNotExist(err) {
				// Created, not started yet (Docker makes the file at
				// start), or another log driver: look again soon.
				in.skip[id] = now.Add(notStartedRecheck)
			} else {
				in.log.Warn("open container log", "container", id, "error", err)
			}
			continue
		}
		if had && t.off == 0 {
			t.skipTo = cur.LastTime // the file was replaced while we were away
		}
		delete(in.skip, id)
		in.tails[id] = t
	}
	for id, until := range in.skip {
		if now.After(until.Add(recheckAfter)) {
			delete(in.skip, id) // forget Containers long gone
		}
	}
}

// open opens t's path, resuming at cur when it names the same file.
func (in *Ingester) open(t *tail, cur Cursor) error {
	f, err := os.Open(t.path)
	if err != nil {
		return err
	}
	ino, size := fileID(f)
	if t.f != nil {
		t.f.Close()
	}
	t.f, t.ino, t.off, t.pend = f, ino, 0, nil
	if cur.Inode == ino && cur.Offset <= size {
		t.off = cur.Offset
	}
	return nil
}

func fileID(f *os.File) (uint64, int64) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino, fi.Size()
	}
	return 0, fi.Size()
}

// checkFile reports whether t's Container is gone (its directory removed)
// or its file was rotated (the path now names another file).
func (in *Ingester) checkFile(t *tail) (gone, rotated bool) {
	fi, err := os.Stat(t.path)
	if err != nil {
		if _, derr := os.Stat(filepath.Dir(filepath.Dir(t.path))); os.IsNotExist(derr) {
			return true, false
		}
		return false, false // mid-rotation: the new file comes next poll
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return false, ok && st.Ino != t.ino
}

// readMore reads what t's file gained (at most readChunk) and stores the
// lines; final says no more will come, so a frame cut short is corrupt.
func (in *Ingester) readMore(t *tail, final bool) {
	for read := 0; read < readChunk || final; {
		if cap(t.pend)-len(t.pend) < 64<<10 {
			t.pend = append(make([]byte, 0, 2*cap(t.pend)+256<<10), t.pend...)
		}
		n, err := t.f.ReadAt(t.pend[len(t.pend):cap(t.pend)], t.off)
		t.off += int64(n)
		read += n
		t.pend = t.pend[:len(t.pend)+n]
		if n == 0 || (err != nil && !errors.Is(err, io.EOF)) {
			break
		}
	}
	if len(t.pend) == 0 {
		return
	}
	es, consumed, corrupt := dockerlog.Decode(t.pend, final)
	if corrupt > 0 {
		in.corrupt.Add(uint64(corrupt))
		in.log.Warn("skipped corrupt bytes in a Docker log file", "container", t.meta.ID, "bytes", corrupt)
	}
	var out []dockerlog.Line
	for _, e := range es {
		if e.TimeNano <= t.skipTo {
			continue
		}
		out = append(out, t.asm.Add(e)...)
	}
	if len(es) > 0 {
		t.lastData = in.now()
	}
	for _, l := range out {
		if l.TimeNano > t.lastTime {
			t.lastTime = l.TimeNano
		}
	}
	in.lines.Add(uint64(len(out)))
	in.store.Append(t.meta, out)
	t.pend = t.pend[:copy(t.pend, t.pend[consumed:])]
	if len(t.pend) == 0 && cap(t.pend) > 1<<20 {
		t.pend = nil // a burst is over; do not hold its buffer
	}
}
