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
