package zfsvol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	zfs "github.com/mistifyio/go-zfs/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
	"github.com/ployz/ployz/sdk/volume"
)

// Layout: every Provisioned Volume is the dataset <pool>/VolumesDataset/<name>,
// mounted at MountRoot/<name>, the host path a Service Container
// bind-mounts. The mountpoint is set on each volume rather than inherited
// so that it does not depend on the pool's own mountpoint.
const (
	VolumesDataset = "ployz/volumes"
	MountRoot      = volume.MountRoot
)

// Manager provisions volumes in one pool. Its zero pool means the Machine
// was given none: every call but Pool is refused, saying so.
//
// Changes to one volume (create, remove, snapshot, receive, rollback,
// readonly) take that volume's lock; mu guards only the pool and the
// locks' map and is never held across a zfs command. A receive holds its
// volume's lock for the whole stream, minutes on a large volume: under
// one Manager-wide lock every other volume's change, and every Get (the
// pool read), waited behind it.
type Manager struct {
	mu     sync.Mutex
	pool   string
	vols   map[string]*sync.Mutex // per volume, made on first use, kept
	parent sync.Mutex             // ensureParent's create
}

// volume locks volume name's changes; the caller calls the unlock.
func (m *Manager) volume(name string) (unlock func()) {
	m.mu.Lock()
	if m.vols == nil {
		m.vols = map[string]*sync.Mutex{}
	}
	l, ok := m.vols[name]
	if !ok {
		l = &sync.Mutex{}
		m.vols[name] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// SetPool switches the pool; "" means none.
func (m *Manager) SetPool(pool string) {
	m.mu.Lock()
	m.pool = pool
	m.mu.Unlock()
}

// Pool is the configured pool ("" for none).
func (m *Manager) Pool() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pool
}

// errNoPool is what a Machine without a pool answers.
func errNoPool() error {
	return status.Errorf(codes.FailedPrecondition,
		"this Machine has no ZFS pool, so no Provisioned Volumes (label %s unset): set one with `ployz machine update MACHINE --zfs-pool NAME`", volume.PoolLabel)
}

// ready checks the pool is configured and exists, and returns it.
func (m *Manager) ready() (string, error) { return checkPool(m.Pool()) }

// checkPool checks pool is set and exists.
func checkPool(pool string) (string, error) {
	if pool == "" {
		return "", errNoPool()
	}
	if _, err := zfs.GetZpool(pool); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "pool: ZFS pool %q (label %s) does not exist on this Machine: %s", pool, volume.PoolLabel, zfsMsg(err))
	}
	return pool, nil
}

func dataset(pool, name string) string { return pool + "/" + VolumesDataset + "/" + name }

// Mountpoint is where volume name is mounted on the host.
func Mountpoint(name string) string { return filepath.Join(MountRoot, name) }

// zfsMsg is the useful part of a zfs command's failure: its stderr.
func zfsMsg(err error) string {
	var ze *zfs.Error
	if errors.As(err, &ze) && strings.TrimSpace(ze.Stderr) != "" {
		return strings.TrimSpace(ze.Stderr)
	}
	return err.Error()
}

func notFound(name string) error {
	return status.Errorf(codes.NotFound, "name: no volume %q on this Machine", name)
}

func checkName(field, name string, valid func(string) error) error {
	if err := valid(name); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: %v", field, err)
	}
	return nil
}

// get returns the volume's dataset, or NotFound.
func get(pool, name string) (*zfs.Dataset, error) {
	ds, err := zfs.GetDataset(dataset(pool, name))
	if err != nil {
		if strings.Contains(zfsMsg(err), "does not exist") {
			return nil, notFound(name)
		}
		return nil, status.Errorf(codes.Internal, "zfs: %s", zfsMsg(err))
	}
	return ds, nil
}

// ensureParent creates <pool>/ployz/volumes, mounted nowhere itself, one
// caller at a time (two volumes' first changes would both create it).
func (m *Manager) ensureParent(ctx context.Context, pool string) error {
	m.parent.Lock()
	defer m.parent.Unlock()
	parent := pool + "/" + VolumesDataset
	if _, err := zfs.GetDataset(parent); err == nil {
		return nil
	}
	if _, err := run(ctx, nil, nil, "create", "-p", "-o", "mountpoint=none", parent); err != nil {
		return status.Errorf(codes.Internal, "create %s: %v", parent, err)
	}
	return nil
}

// Create makes volume name with a quota of size bytes (0: none). An
// existing volume with the same quota is answered as it is; another quota
// is a clash.
func (m *Manager) Create(ctx context.Context, name string, size uint64) (*volumev1.VolumeInfo, error) {
	if err := checkName("name", name, volume.ValidName); err != nil {
		return nil, err
	}
	if size != 0 && size < volume.MinSize {
		return nil, status.Errorf(codes.InvalidArgument, "size_bytes: %d is below the minimum of %d (1MiB)", size, volume.MinSize)
	}
	defer m.volume(name)()
	pool, err := m.ready()
	if err != nil {
		return nil, err
	}
	if ds, err := get(pool, name); err == nil {
		if ds.Quota != size {
			return nil, status.Errorf(codes.AlreadyExists, "name: volume %q already exists on this Machine with size %d bytes", name, ds.Quota)
		}
		return info(ctx, name, ds)
	} else if status.Code(err) != codes.NotFound {
		return nil, err
	}
	if err := m.ensureParent(ctx, pool); err != nil {
		return nil, err
	}
	quota := "none"
	if size > 0 {
		quota = strconv.FormatUint(size, 10)
	}
	ds, err := zfs.CreateFilesystem(dataset(pool, name), map[string]string{"quota": quota, "mountpoint": Mountpoint(name)})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "create volume %q: %s", name, zfsMsg(err))
	}
	return info(ctx, name, ds)
}

// Remove destroys volume name and its snapshots. A volume a Container
// still mounts is busy and stays.
func (m *Manager) Remove(ctx context.Context, name string) error {
	if err := checkName("name", name, volume.ValidName); err != nil {
		return err
	}
	defer m.volume(name)()
	pool, err := m.ready()
	if err != nil {
		return err
	}
	if _, err := get(pool, name); err != nil {
		return err
	}
	if _, err := run(ctx, nil, nil, "destroy", "-r", dataset(pool, name)); err != nil {
		if strings.Contains(err.Error(), "busy") {
			return status.Errorf(codes.FailedPrecondition, "name: volume %q is in use (a Container mounts it?): %v", name, err)
		}
		return status.Errorf(codes.Internal, "destroy volume %q: %v", name, err)
	}
	// ZFS leaves the empty mountpoint directory behind.
	_ = os.Remove(Mountpoint(name))
	return nil
}

// List describes every volume in the pool.
func (m *Manager) List(ctx context.Context) ([]*volumev1.VolumeInfo, error) {
	pool, err := m.ready()
	if err != nil {
		return nil, err
	}
	parent, err := zfs.GetDataset(pool + "/" + VolumesDataset)
	if err != nil {
		return nil, nil // nothing created yet
	}
	kids, err := parent.Children(1)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list volumes: %s", zfsMsg(err))
	}
	var out []*volumev1.VolumeInfo
	for _, ds := range kids {
		if ds.Type != zfs.DatasetFilesystem {
			continue
		}
		vi, err := info(ctx, strings.TrimPrefix(ds.Name, parent.Name+"/"), ds)
		if err != nil {
			return nil, err
		}
		out = append(out, vi)
	}
	return out, nil
}

// Get describes volume name.
func (m *Manager) Get(ctx context.Context, name string) (*volumev1.VolumeInfo, error) {
	if err := checkName("name", name, volume.ValidName); err != nil {
		return nil, err
	}
	pool, err := m.ready()
	if err != nil {
		return nil, err
	}
	ds, err := get(pool, name)
	if err != nil {
		return nil, err
	}
	return info(ctx, name, ds)
}

// lockedVolume checks volume name (the request's field), takes its change
// lock and finds its dataset; on success the caller calls unlock.
func (m *Manager) lockedVolume(field, name string) (ds *zfs.Dataset, unlock func(), err error) {
	if err := checkName(field, name, volume.ValidName); err != nil {
		return nil, nil, err
	}
	unlock = m.volume(name)
	pool, err := m.ready()
	if err == nil {
		ds, err = get(pool, name)
	}
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return ds, unlock, nil
}

// lockedSnapshots checks snapshot name snap, takes the change lock on
// volume name and lists its snapshots; on success the caller calls
// unlock.
func (m *Manager) lockedSnapshots(ctx context.Context, name, snap string) (ds *zfs.Dataset, snaps []*volumev1.SnapshotInfo, unlock func(), err error) {
	if err := checkName("snapshot", snap, volume.ValidSnapshot); err != nil {
		return nil, nil, nil, err
	}
	ds, unlock, err = m.lockedVolume("volume", name)
	if err != nil {
		return nil, nil, nil, err
	}
	if snaps, err = snapshots(ctx, ds.Name); err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return ds, snaps, unlock, nil
}

// Snapshot takes snapshot snap of volume name.
func (m *Manager) Snapshot(ctx context.Context, name, snap string) (*volumev1.SnapshotInfo, error) {
	ds, snaps, unlock, err := m.lockedSnapshots(ctx, name, snap)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, s := range snaps {
		if s.GetName() == snap {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot: volume %q already has a snapshot %q", name, snap)
		}
	}
	if _, err := ds.Snapshot(snap, false); err != nil {
		return nil, status.Errorf(codes.Internal, "snapshot %s@%s: %s", name, snap, zfsMsg(err))
	}
	snaps, err = snapshots(ctx, ds.Name)
	if err != nil {
		return nil, err
	}
	for _, s := range snaps {
		if s.GetName() == snap {
			return s, nil
		}
	}
	return nil, status.Errorf(codes.Internal, "snapshot %s@%s was taken but is not listed", name, snap)
}

// Send writes the stream req asks for to w.
func (m *Manager) Send(ctx context.Context, req *volumev1.SendRequest, w io.Writer) error {
	args, err := m.sendArgs(ctx, req)
	if err != nil {
		return err
	}
	if _, err := run(ctx, nil, w, args...); err != nil {
		if req.GetResumeToken() != "" {
			return status.Errorf(codes.FailedPrecondition, "resume_token: %v", err)
		}
		return status.Errorf(codes.Internal, "zfs send: %v", err)
	}
	return nil
}

// Estimate is the size of the stream req asks for, as zfs send -nP
// (a dry run) estimates it.
func (m *Manager) Estimate(ctx context.Context, req *volumev1.SendRequest) (uint64, error) {
	args, err := m.sendArgs(ctx, req)
	if err != nil {
		return 0, err
	}
	lines, err := run(ctx, nil, nil, append([]string{"send", "-nP"}, args[1:]...)...)
	if err != nil {
		return 0, status.Errorf(codes.Internal, "zfs send -nP: %v", err)
	}
	for _, l := range lines {
		if len(l) == 2 && l[0] == "size" {
			return strconv.ParseUint(l[1], 10, 64)
		}
	}
	return 0, status.Errorf(codes.Internal, "zfs send -nP printed no size")
}

// sendArgs are the zfs arguments of the stream req asks for, checked
// against the volume's snapshots.
func (m *Manager) sendArgs(ctx context.Context, req *volumev1.SendRequest) ([]string, error) {
	pool, err := m.ready()
	if err != nil {
		return nil, err
	}
	if tok := req.GetResumeToken(); tok != "" {
		return resumeArgs(ctx, pool, req.GetVolume(), tok)
	}
	name, snap, from := req.GetVolume(), req.GetSnapshot(), req.GetFromSnapshot()
	if err := checkName("volume", name, volume.ValidName); err != nil {
		return nil, err
	}
	if err := checkName("snapshot", snap, volume.ValidSnapshot); err != nil {
		return nil, err
	}
	if from != "" {
		if err := checkName("from_snapshot", from, volume.ValidSnapshot); err != nil {
			return nil, err
		}
	}
	ds, err := get(pool, name)
	if err != nil {
		return nil, err
	}
	snaps, err := snapshots(ctx, ds.Name)
	if err != nil {
		return nil, err
	}
	if !hasSnapshot(snaps, snap) {
		return nil, status.Errorf(codes.NotFound, "snapshot: volume %q has no snapshot %q", name, snap)
	}
	base := ""
	if from != "" {
		// The snapshot itself, or where a run pruned it its bookmark.
		base = "@" + from
		if !hasSnapshot(snaps, from) {
			marks, err := bookmarks(ctx, ds.Name)
			if err != nil {
				return nil, err
			}
			if !hasBookmark(marks, from) {
				return nil, status.Errorf(codes.NotFound, "from_snapshot: volume %q has no snapshot or bookmark %q", name, from)
			}
			base = "#" + from
		}
	}
	return sendCommand(ds.Name, snap, base), nil
}

// sendCommand is zfs send of dataset@snap: full without base, else
// incremental from base ("@snap" or "#bookmark", as zfs send -i takes
// either).
func sendCommand(dataset, snap, base string) []string {
	args := []string{"send"}
	if base == "" {
		args = append(args, "-p") // a full stream carries the quota
	} else {
		args = append(args, "-i", dataset+base)
	}
	return append(args, dataset+"@"+snap)
}

func hasBookmark(marks []*volumev1.BookmarkInfo, name string) bool {
	for _, b := range marks {
		if b.GetName() == name {
			return true
		}
	}
	return false
}

// DestroySnapshot destroys snapshot snap of volume name, with mark first
// keeping a bookmark of the same name (kept when one is there). A
// snapshot already gone succeeds, so a retried prune does not fail.
func (m *Manager) DestroySnapshot(ctx context.Context, name, snap string, mark bool) (*volumev1.VolumeInfo, error) {
	ds, snaps, unlock, err := m.lockedSnapshots(ctx, name, snap)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if hasSnapshot(snaps, snap) {
		marks, err := bookmarks(ctx, ds.Name)
		if err != nil {
			return nil, err
		}
		for _, args := range destroyCommands(ds.Name, snap, mark && !hasBookmark(marks, snap)) {
			if _, err := run(ctx, nil, nil, args...); err != nil {
				return nil, status.Errorf(codes.Internal, "snapshot: %s %s@%s: %v", args[0], name, snap, err)
			}
		}
	}
	return info(ctx, name, ds)
}

// destroyCommands are the zfs commands destroying dataset@snap, with
// mark bookmarking it first as dataset#snap.
func destroyCommands(dataset, snap string, mark bool) [][]string {
	var out [][]string
	if mark {
		out = append(out, []string{"bookmark", dataset + "@" + snap, dataset + "#" + snap})
	}
	return append(out, []string{"destroy", dataset + "@" + snap})
}

func hasSnapshot(snaps []*volumev1.SnapshotInfo, name string) bool {
	for _, s := range snaps {
		if s.GetName() == name {
			return true
		}
	}
	return false
}

// rollbackFirst reports whether a stream into the existing dataset ds
// rolls it back to its newest snapshot first (zfs receive -F). The daemon
// receives only into a copy that is not the Writer, so changes since that
// snapshot are an older Writer's writes, lost when it was demoted, and
// must not refuse the stream. Not when ds holds a cut receive's state
// (the stream resumes it), nor without snapshots: a full stream must
// never replace a dataset, and zfs refuses that only while it has some.
func rollbackFirst(ctx context.Context, ds string) bool {
	out, err := run(ctx, nil, nil, "get", "-H", "-o", "value", "receive_resume_token", ds)
	if err != nil || len(out) != 1 || len(out[0]) != 1 || (out[0][0] != "-" && out[0][0] != "") {
		return false
	}
	snaps, err := snapshots(ctx, ds)
	return err == nil && len(snaps) > 0
}

// Receive reads a stream from r into volume name and returns the bytes
// read. A full stream creates the volume (mounted at Mountpoint(name));
// an incremental one or a resumed one lands in the existing volume. With
// resumable, an interrupted stream leaves a resume token on the volume.
func (m *Manager) Receive(ctx context.Context, name string, resumable bool, r io.Reader) (uint64, error) {
	if err := checkName("volume", name, volume.ValidName); err != nil {
		return 0, err
	}
	defer m.volume(name)()
	pool, err := m.ready()
	if err != nil {
		return 0, err
	}
	if err := m.ensureParent(ctx, pool); err != nil {
		return 0, err
	}
	args := []string{"receive"}
	if resumable {
		args = append(args, "-s")
	}
	ds := dataset(pool, name)
	if _, err := get(pool, name); status.Code(err) == codes.NotFound {
		// atime off: reading a received copy must not count as a change
		// that makes the next incremental receive refuse it.
		args = append(args, "-o", "mountpoint="+Mountpoint(name), "-o", "atime=off")
	} else if err != nil {
		return 0, err
	} else if rollbackFirst(ctx, ds) {
		args = append(args, "-F")
	}
	c := &counter{r: r}
	if _, err := run(ctx, c, nil, append(args, ds)...); err != nil {
		return c.n, status.Errorf(codes.FailedPrecondition, "volume: receive into %q after %d bytes: %v", name, c.n, err)
	}
	// A resumed receive may land without the mountpoint its first part
	// was given: make it the one every volume has.
	if mp, err := run(ctx, nil, nil, "get", "-H", "-o", "value", "mountpoint", ds); err == nil && len(mp) == 1 && mp[0][0] != Mountpoint(name) {
		if _, err := run(ctx, nil, nil, "set", "mountpoint="+Mountpoint(name), ds); err != nil {
			return c.n, status.Errorf(codes.Internal, "volume: received %q but could not mount it at %s: %v", name, Mountpoint(name), err)
		}
	}
	return c.n, nil
}

// SetReadOnly sets volume name's ZFS readonly property: on refuses every
// write through the mountpoint (a Mirror), off takes them (the Writer).
// It is set locally, so it outranks the value a `zfs send -p` stream
// carries from the sender; zfs receive still lands in a readonly dataset.
func (m *Manager) SetReadOnly(ctx context.Context, name string, readOnly bool) (*volumev1.VolumeInfo, error) {
	ds, unlock, err := m.lockedVolume("name", name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v := "off"
	if readOnly {
		v = "on"
	}
	if _, err := run(ctx, nil, nil, "set", "readonly="+v, ds.Name); err != nil {
		return nil, status.Errorf(codes.Internal, "set readonly=%s on volume %q: %v", v, name, err)
	}
	return info(ctx, name, ds)
}

type counter struct {
	r io.Reader
	n uint64
}

func (c *counter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += uint64(k)
	return k, err
}

// PoolInfo describes candidate, or without one the configured pool.
func (m *Manager) PoolInfo(candidate string) (*volumev1.PoolResponse, error) {
	pool := m.Pool()
	if candidate != "" {
		if err := volume.ValidPool(candidate); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "pool: %v", err)
		}
		pool = candidate
	}
	if pool == "" {
		return &volumev1.PoolResponse{}, nil
	}
	if _, err := checkPool(pool); err != nil {
		return nil, err
	}
	z, err := zfs.GetZpool(pool)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "zpool %s: %s", pool, zfsMsg(err))
	}
	return &volumev1.PoolResponse{Configured: true, Pool: pool, Health: z.Health, SizeBytes: z.Size, FreeBytes: z.Free}, nil
}

// info describes a volume's dataset.
func info(ctx context.Context, name string, ds *zfs.Dataset) (*volumev1.VolumeInfo, error) {
	vi := &volumev1.VolumeInfo{Name: name, Dataset: ds.Name, Mountpoint: ds.Mountpoint, SizeBytes: ds.Quota, UsedBytes: ds.Used}
	props, err := run(ctx, nil, nil, "get", "-Hp", "-o", "property,value", "creation,receive_resume_token,readonly", ds.Name)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "zfs get %s: %v", ds.Name, err)
	}
	for _, l := range props {
		if len(l) < 2 {
			continue
		}
		switch l[0] {
		case "creation":
			if s, err := strconv.ParseInt(l[1], 10, 64); err == nil {
				vi.CreatedUnixNanos = s * int64(time.Second)
			}
		case "receive_resume_token":
			if l[1] != "-" {
				vi.ResumeToken = l[1]
			}
		case "readonly":
			vi.ReadOnly = l[1] == "on"
		}
	}
	snaps, err := snapshots(ctx, ds.Name)
	if err != nil {
		return nil, err
	}
	vi.SnapshotDetails = snaps
	for _, s := range snaps {
		vi.Snapshots = append(vi.Snapshots, s.GetName())
	}
	if vi.Bookmarks, err = bookmarks(ctx, ds.Name); err != nil {
		return nil, err
	}
	return vi, nil
}

// bookmarks lists a dataset's bookmarks, oldest first.
func bookmarks(ctx context.Context, ds string) ([]*volumev1.BookmarkInfo, error) {
	ps, err := points(ctx, ds, "bookmark", "guid")
	var out []*volumev1.BookmarkInfo
	for _, p := range ps {
		out = append(out, &volumev1.BookmarkInfo{Name: p.name, CreatedUnixNanos: p.created, Guid: p.props[0]})
	}
	return out, err
}

// snapshots lists a dataset's snapshots, oldest first.
func snapshots(ctx context.Context, ds string) ([]*volumev1.SnapshotInfo, error) {
	ps, err := points(ctx, ds, "snapshot", "used", "guid")
	var out []*volumev1.SnapshotInfo
	for _, p := range ps {
		s := &volumev1.SnapshotInfo{Name: p.name, CreatedUnixNanos: p.created, Guid: p.props[1]}
		s.UsedBytes, _ = strconv.ParseUint(p.props[0], 10, 64)
		out = append(out, s)
	}
	return out, err
}

// point is one snapshot or bookmark of a dataset: its own name (after
// the @ or #), creation time and the properties asked for, in order.
type point struct {
	name    string
	created int64
	props   []string
}

// points lists a dataset's snapshots or bookmarks (kind), oldest first,
// with props.
func points(ctx context.Context, ds, kind string, props ...string) ([]point, error) {
	lines, err := run(ctx, nil, nil, "list", "-Hp", "-t", kind, "-d", "1", "-s", "createtxg", "-o", strings.Join(append([]string{"name", "creation"}, props...), ","), ds)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list %ss of %s: %v", kind, ds, err)
	}
	return parsePoints(lines, len(props)), nil
}

// parsePoints reads zfs list -Hp -o name,creation,PROPS lines of
// snapshots (pool/ds@name) or bookmarks (pool/ds#name) with n PROPS.
func parsePoints(lines [][]string, n int) []point {
	var out []point
	for _, l := range lines {
		if len(l) < 2+n {
			continue
		}
		i := strings.IndexAny(l[0], "@#")
		if i < 0 {
			continue
		}
		p := point{name: l[0][i+1:], props: l[2 : 2+n]}
		if c, err := strconv.ParseInt(l[1], 10, 64); err == nil {
			p.created = c * int64(time.Second)
		}
		out = append(out, p)
	}
	return out
}

// run runs zfs with args under ctx, stdin from in and stdout to out when
// set; without out it returns stdout's tab-separated lines. Its error
// carries zfs's stderr.
func run(ctx context.Context, in io.Reader, out io.Writer, args ...string) ([][]string, error) {
	cmd := exec.CommandContext(ctx, "zfs", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin = in
	cmd.Stdout = &stdout
	if out != nil {
		cmd.Stdout = out
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("zfs %s: %s", args[0], msg)
	}
	var lines [][]string
	for _, l := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
		if l != "" {
			lines = append(lines, strings.Split(l, "\t"))
		}
	}
	return lines, nil
}

// Rollback returns volume name to its snapshot snap, discarding every
// change since. The snapshots and bookmarks newer than snap (zfs
// rollback -r destroys both) go only with destroyNewer; without it a
// volume that has some is refused naming them. It answers the volume
// after and what was destroyed ("name" for a snapshot, "#name" for a
// bookmark), oldest first.
func (m *Manager) Rollback(ctx context.Context, name, snap string, destroyNewer bool) (*volumev1.VolumeInfo, []string, error) {
	ds, snaps, unlock, err := m.lockedSnapshots(ctx, name, snap)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if !hasSnapshot(snaps, snap) {
		return nil, nil, status.Errorf(codes.NotFound, "snapshot: volume %q has no snapshot %q (it has: %s)", name, snap, snapshotNames(snaps))
	}
	marks, err := bookmarks(ctx, ds.Name)
	if err != nil {
		return nil, nil, err
	}
	newer := newerThan(snaps, marks, snap)
	if len(newer) > 0 && !destroyNewer {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "snapshot: rolling volume %q back to %q destroys what is newer: %s; ask again with destroy_newer to destroy them",
			name, snap, strings.Join(newer, ", "))
	}
	if _, err := run(ctx, nil, nil, rollbackCommand(ds.Name, snap, len(newer) > 0)...); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "snapshot: roll %s back to %s: %v", name, snap, err)
	}
	vi, err := info(ctx, name, ds)
	return vi, newer, err
}

// rollbackCommand is zfs rollback of dataset to snap; with newer, -r
// destroys the snapshots and bookmarks after it (zfs refuses without).
func rollbackCommand(dataset, snap string, newer bool) []string {
	args := []string{"rollback"}
	if newer {
		args = append(args, "-r")
	}
	return append(args, dataset+"@"+snap)
}

// newerThan names what a rollback to snap destroys: the snapshots after
// it (snaps are oldest first, by createtxg) and the bookmarks created
// after it ("#name"). A bookmark of the same second is kept: zfs orders
// by transaction group, which the listing does not carry, so it is
// left to zfs (a bookmark is made from an existing snapshot, so one of
// snap's second is snap's or older).
func newerThan(snaps []*volumev1.SnapshotInfo, marks []*volumev1.BookmarkInfo, snap string) []string {
	var out []string
	var at int64
	found := false
	for _, s := range snaps {
		switch {
		case found:
			out = append(out, s.GetName())
		case s.GetName() == snap:
			found, at = true, s.GetCreatedUnixNanos()
		}
	}
	for _, b := range marks {
		if b.GetCreatedUnixNanos() > at {
			out = append(out, "#"+b.GetName())
		}
	}
	return out
}

// snapshotNames lists snaps' names for a message ("none" without).
func snapshotNames(snaps []*volumev1.SnapshotInfo) string {
	if len(snaps) == 0 {
		return "none"
	}
	names := make([]string, 0, len(snaps))
	for _, s := range snaps {
		names = append(names, s.GetName())
	}
	return strings.Join(names, ", ")
}
