package volprotect

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ployz/ployz/sdk/observe"
)

// Snapshot results Outcomes counts.
const (
	ResultTaken  = "taken"
	ResultPruned = "pruned"
	ResultFailed = "failed"
)

// Outcomes keeps what the metrics plugin serves of the Protector's
// volumes: snapshot results counted since the process started, the
// newest automatic snapshot and each Mirror's last sync. Only volumes
// whose Writer is on this Machine are kept.
type Outcomes struct {
	mu   sync.Mutex
	vols map[string]*observe.VolumeProtection
}

func (o *Outcomes) vol(volume string) *observe.VolumeProtection {
	if o.vols == nil {
		o.vols = map[string]*observe.VolumeProtection{}
	}
	v := o.vols[volume]
	if v == nil {
		v = &observe.VolumeProtection{Volume: volume, Snapshots: map[string]int64{}}
		o.vols[volume] = v
	}
	return v
}

// Count counts one snapshot result of volume.
func (o *Outcomes) Count(volume, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.vol(volume).Snapshots[result]++
}

// Observe sets volume's newest automatic snapshot (zero: none) and its
// Mirrors' last syncs.
func (o *Outcomes) Observe(volume string, last time.Time, lags []Lag) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := o.vol(volume)
	v.LastSnapshot = 0
	if !last.IsZero() {
		v.LastSnapshot = last.UnixMilli()
	}
	v.Mirrors = nil
	for _, l := range lags {
		v.Mirrors = append(v.Mirrors, observe.MirrorSync{Machine: l.Machine, LastSync: l.Synced.UnixMilli()})
	}
}

// Keep forgets every volume but these (their Writer left, or their
// policy went).
func (o *Outcomes) Keep(volumes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k := range o.vols {
		if !slices.Contains(volumes, k) {
			delete(o.vols, k)
		}
	}
}

// Snapshot is a copy, sorted by volume (nil when empty).
func (o *Outcomes) Snapshot() []observe.VolumeProtection {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []observe.VolumeProtection
	for _, v := range o.vols {
		c := *v
		c.Snapshots = make(map[string]int64, len(v.Snapshots))
		for k, n := range v.Snapshots {
			c.Snapshots[k] = n
		}
		c.Mirrors = slices.Clone(v.Mirrors)
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}
