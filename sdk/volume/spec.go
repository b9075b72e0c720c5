package volume

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	units "github.com/docker/go-units"
)

// Capability names a volume plugin advertises, one per Machine RPC ployzd
// forwards to it (core/rpc's volume commands carry the same names).
const (
	CapCreate   = "ployz.volume.create.v1"
	CapRemove   = "ployz.volume.remove.v1"
	CapList     = "ployz.volume.list.v1"
	CapInspect  = "ployz.volume.inspect.v1"
	CapSnapshot = "ployz.volume.snapshot.v1"
	CapSend     = "ployz.volume.send.v1"
	CapReceive  = "ployz.volume.receive.v1"
	// CapReadOnly is SetReadOnly, which no Machine RPC forwards as such:
	// ployzd calls it as a copy becomes a Mirror or the Writer.
	CapReadOnly = "ployz.volume.readonly.v1"
	// CapPrune is DestroySnapshot (bookmarking first), the bookmarks a
	// listing carries and a Send from a bookmark: ployzd keeps a copy's
	// newest run snapshots with it. A plugin without it is not pruned.
	CapPrune = "ployz.volume.prune.v1"
	// CapRollback is Rollback: ployzd's rollback_volume (`ployz volume
	// snapshot restore`) returns the Writer's copy to a snapshot with it.
	CapRollback = "ployz.volume.rollback.v1"
)

// Capabilities are all of them, in the order a plugin lists them.
var Capabilities = []string{CapCreate, CapRemove, CapList, CapInspect, CapSnapshot, CapSend, CapReceive, CapReadOnly, CapPrune, CapRollback}

// runSnapshotRe names the snapshots Volume Runs take: run-<gen>, and a
// Move's run-<gen>-cut. Any other name is an operator's own snapshot.
var runSnapshotRe = regexp.MustCompile(`^run-[0-9]+(-cut)?$`)

// IsRunSnapshot reports whether name is a snapshot a Volume Run took.
func IsRunSnapshot(name string) bool { return runSnapshotRe.MatchString(name) }

// KeepRunSnapshots is how many run snapshots a copy keeps: the newest
// (the base of the next incremental) and the one before it.
const KeepRunSnapshots = 2

// PruneRunSnapshots names the run snapshots of snaps (oldest first) to
// destroy so that the newest keep of them stay. Other snapshots are an
// operator's and never named.
func PruneRunSnapshots(snaps []string, keep int) []string {
	var runs []string
	for _, s := range snaps {
		if IsRunSnapshot(s) {
			runs = append(runs, s)
		}
	}
	if keep < 1 {
		keep = 1 // the newest is the base of the next incremental
	}
	if len(runs) <= keep {
		return nil
	}
	return runs[:len(runs)-keep]
}

// PoolLabel is the Machine label naming the ZFS pool its Provisioned
// Volumes live in (`ployz machine init|add|update --zfs-pool NAME`).
// Without it the Machine has no Provisioned Volumes.
const PoolLabel = "ployz.zfs.pool"

// MountRoot is where a Machine mounts its Provisioned Volumes, one
// directory per volume (MountRoot/<name>): the host path a Service
// Container bind-mounts, and what ployzd's admission recognises.
const MountRoot = "/var/lib/ployz/volumes"

// DefaultSpecPath is where the volume-zfs plugin keeps its spec
// (sdk.KeepConfig), so a restart serves the same pool without waiting for
// ployzd. It is on disk, not /run: the pool outlives a reboot.
const DefaultSpecPath = "/var/lib/ployz/volume-zfs.json"

// Spec is the volume-zfs.json document. Field names are frozen; new
// fields are optional with a default, and unknown fields are ignored.
type Spec struct {
	// MachineID is this Machine's id, for logs.
	MachineID string `json:"machine_id,omitempty"`
	// Pool is the ZFS pool volumes are provisioned in; empty means none
	// (the Machine has no Provisioned Volumes).
	Pool string `json:"pool,omitempty"`
}

// ParseSpec decodes and validates a spec; errors name the field.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if t := bytes.TrimSpace(b); len(t) == 0 || string(t) == "null" {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("volume spec: %w", err)
	}
	if s.Pool != "" {
		if err := ValidPool(s.Pool); err != nil {
			return s, fmt.Errorf("volume spec: field \"pool\": %w", err)
		}
	}
	return s, nil
}

// LoadSpec reads a kept spec; a missing file is the empty spec (no pool).
func LoadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return Spec{}, nil
	}
	if err != nil {
		return Spec{}, err
	}
	return ParseSpec(b)
}

// SpecFromLabels is the spec a Machine's labels ask for.
func SpecFromLabels(machineID string, labels map[string]string) Spec {
	return Spec{MachineID: machineID, Pool: strings.TrimSpace(labels[PoolLabel])}
}

// poolRe follows zpool(8)'s naming rule: a letter first, then letters,
// digits, '_', '-', '.', ':' (no '/': a pool, not a dataset).
var poolRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]{0,254}$`)

// ValidPool checks a ZFS pool name.
func ValidPool(name string) error {
	if !poolRe.MatchString(name) {
		return fmt.Errorf("%q is not a ZFS pool name (a letter, then letters, digits, _ - . :)", name)
	}
	for _, r := range []string{"mirror", "raidz", "draid", "spare", "log"} {
		if strings.HasPrefix(name, r) {
			return fmt.Errorf("%q: a pool name may not begin with the reserved word %q", name, r)
		}
	}
	return nil
}

// nameRe is a volume or snapshot name: what Docker, ZFS and a shell all
// take without quoting.
var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidName checks a volume name.
func ValidName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%q is not a volume name (1-63 of a-z 0-9 _ . -, starting with a letter or digit)", name)
	}
	return nil
}

// ValidSnapshot checks a snapshot name.
func ValidSnapshot(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%q is not a snapshot name (1-63 of a-z 0-9 _ . -, starting with a letter or digit)", name)
	}
	return nil
}

// MinSize is the smallest quota a volume takes: below it ZFS's own
// metadata would not fit.
const MinSize = 1 << 20

// ParseSize reads a volume size such as "512MiB", "1GiB" or "10G" (binary
// units either way) or a plain number of bytes.
func ParseSize(v string) (uint64, error) {
	n, err := units.RAMInBytes(strings.TrimSpace(v))
	if err != nil || strings.TrimSpace(v) == "" {
		return 0, fmt.Errorf("%q is not a size (e.g. 512MiB, 1GiB)", v)
	}
	if n < MinSize {
		return 0, fmt.Errorf("%q: %d bytes is below the minimum of 1MiB", v, n)
	}
	return uint64(n), nil
}
