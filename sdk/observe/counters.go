package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Counters are counts only ployzd and its plugin host know, which the
// metrics plugin serves with the Machine's metrics: ployzd rewrites them
// into Spec.CountersFile as they change, and the plugin reads the file on
// each tick (it talks to no daemon, and a file outlives neither side's
// restart for long). Fields are only added.
type Counters struct {
	// StoreEventsDropped counts the store subscription changes a process
	// dropped as duplicate or out of order since it started, by process
	// ("ployzd", or a plugin's name) and then by table. Above zero, a
	// store server repeated or reordered changes.
	StoreEventsDropped map[string]map[string]int64 `json:"store_events_dropped,omitempty"`
	// JobRuns are the scheduled-job runs this Machine recorded an outcome
	// for since ployzd started, one entry per job, sorted by namespace
	// and service.
	JobRuns []JobRuns `json:"job_runs,omitempty"`
	// VolumeProtection is the scheduled protection (x-volume) of the
	// volumes whose Writer is on this Machine, sorted by volume.
	VolumeProtection []VolumeProtection `json:"volume_protection,omitempty"`
}

// VolumeProtection is one volume's scheduled protection on its Writer's
// Machine: automatic snapshots by result (taken, pruned, failed) since
// ployzd started, when the newest was taken, and each Mirror's last sync.
type VolumeProtection struct {
	Volume    string           `json:"volume"`
	Snapshots map[string]int64 `json:"snapshots,omitempty"`
	// LastSnapshot is when the newest automatic snapshot there was taken,
	// in unix milliseconds; 0: none.
	LastSnapshot int64        `json:"last_snapshot_unix_ms,omitempty"`
	Mirrors      []MirrorSync `json:"mirrors,omitempty"`
}

// MirrorSync is when a Mirror was last brought level: the start of the
// newest Volume Run whose stream landed there, in unix milliseconds.
type MirrorSync struct {
	Machine  string `json:"machine"`
	LastSync int64  `json:"last_sync_unix_ms"`
}

// JobRuns is one scheduled job's outcomes on this Machine: counts by
// final status (succeeded, failed, lost, missed, skipped), the last
// run's status (a skipped tick is not a run and leaves it) and when
// the last successful run ended.
type JobRuns struct {
	Namespace string           `json:"namespace"`
	Service   string           `json:"service"`
	ByStatus  map[string]int64 `json:"by_status,omitempty"`
	// LastStatus is the last run's final status; "" when only skipped
	// ticks were recorded.
	LastStatus string `json:"last_status,omitempty"`
	// LastSuccess is when the last successful run ended, in unix
	// milliseconds; 0 when none did since ployzd started.
	LastSuccess int64 `json:"last_success_unix_ms,omitempty"`
}

// DaemonProcess names ployzd's own counts in Counters.
const DaemonProcess = "ployzd"

// ReadCounters reads a counters file; a file not written yet is no counts.
func ReadCounters(path string) (Counters, error) {
	var c Counters
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("counters: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Counters{}, fmt.Errorf("counters %s: %w", path, err)
	}
	return c, nil
}

// WriteCounters replaces the counters file at path in one rename, so a
// reader never sees half of it.
func WriteCounters(path string, c Counters) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	return nil
}
