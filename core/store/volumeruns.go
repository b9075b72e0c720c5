package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// VolumeRunOpen and VolumeRunLost are the run states the Cluster itself
// reads and writes (core/operator names every state; this package sits
// below it).
const (
	VolumeRunOpen = "open"
	VolumeRunLost = "lost"
)

// VolumeRunBody is one Volume Run (table volume_runs, keyed by
// VolumeRunKey): what readers filter on, who drove it, the nonce of the
// volume lease it was begun under, and the run's record
// (core/operator.VolumeRun's JSON, kept opaque here). State and Error are
// the Cluster's word on the run: a run marked lost here is lost whatever
// its record last said.
type VolumeRunBody struct {
	Volume    string          `json:"volume"`
	Gen       uint64          `json:"gen"`
	Kind      string          `json:"kind"`
	State     string          `json:"state"`
	Error     string          `json:"error,omitempty"`
	StartedAt int64           `json:"started_at"` // unix ms
	UpdatedAt int64           `json:"updated_at"` // unix ms
	Operator  HistoryOperator `json:"operator"`
	// Lease is the LeaseTag of the volume:<volume> lease its driver
	// held ("": driven unleased, or imported).
	Lease string          `json:"lease,omitempty"`
	Run   json.RawMessage `json:"run"`
}

// VolumeRunKey is a run's key: "<volume>/<gen>".
func VolumeRunKey(volume string, gen uint64) string { return fmt.Sprintf("%s/%d", volume, gen) }

// VolumeRuns is the volume_runs table.
func VolumeRuns(c *sdkstore.Client) sdkstore.Table[VolumeRunBody] {
	return sdkstore.NewTable[VolumeRunBody](c, "volume_runs", "id")
}

// VolumeRunsOf returns volume's runs ("" for every volume), newest first:
// by gen within a volume, by start across volumes.
func VolumeRunsOf(ctx context.Context, c *sdkstore.Client, volume string) ([]sdkstore.Row[VolumeRunBody], error) {
	t := VolumeRuns(c)
	var rows []sdkstore.Row[VolumeRunBody]
	var err error
	if volume == "" {
		rows, err = t.List(ctx)
	} else {
		rows, err = t.Where(ctx, "WHERE json_extract(body, '$.volume') = ?", volume)
	}
	if err != nil {
		return nil, err
	}
	SortVolumeRuns(rows, volume)
	return rows, nil
}

// SortVolumeRuns orders runs newest first: one volume's by gen, every
// volume's (volume "") by start, then volume, then gen.
func SortVolumeRuns(rows []sdkstore.Row[VolumeRunBody], volume string) {
	slices.SortFunc(rows, func(a, b sdkstore.Row[VolumeRunBody]) int {
		if volume != "" {
			return cmp.Compare(b.Body.Gen, a.Body.Gen)
		}
		return cmp.Or(cmp.Compare(b.Body.StartedAt, a.Body.StartedAt), cmp.Compare(a.Body.Volume, b.Body.Volume), cmp.Compare(b.Body.Gen, a.Body.Gen))
	})
}

// VolumeRunHeld reports whether an open run's driver still holds its
// volume: the volume's live lease (nil: none) carries the run's nonce.
// A run begun unleased is held by no lease.
func VolumeRunHeld(run VolumeRunBody, lease *LeaseBody, now int64) bool {
	return run.Lease != "" && lease != nil && lease.Live(now) && LeaseTag(lease.Nonce) == run.Lease
}

// NextVolumeRun decides a new run on one volume from its runs: the open
// runs whose driver no longer holds the volume's lease (to be marked
// lost), the open run still held (the new run is refused), and the new
// run's gen, above every gen of the volume and above floor.
func NextVolumeRun(rows []sdkstore.Row[VolumeRunBody], lease *LeaseBody, floor uint64, now int64) (lost []sdkstore.Row[VolumeRunBody], held *sdkstore.Row[VolumeRunBody], gen uint64) {
	gen = floor
	for i, r := range rows {
		gen = max(gen, r.Body.Gen)
		if r.Body.State != VolumeRunOpen {
			continue
		}
		if VolumeRunHeld(r.Body, lease, now) {
			held = &rows[i]
			continue
		}
		lost = append(lost, r)
	}
	return lost, held, gen + 1
}

// LeaseTag is what a run keeps of its lease's nonce: enough to match the
// live lease, never the nonce itself (the holder's secret to renew with).
func LeaseTag(nonce string) string {
	if nonce == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(nonce))
	return hex.EncodeToString(sum[:12])
}

// Recorded is b with a driver's newer record of the run; an open record
// does not reopen a run the Cluster marked lost (its driver, still
// writing steps, lost the volume).
func (b VolumeRunBody) Recorded(run json.RawMessage, state, errText string, updated int64) VolumeRunBody {
	b.Run, b.UpdatedAt = run, updated
	if b.State == VolumeRunLost && state == VolumeRunOpen {
		return b
	}
	b.State, b.Error = state, errText
	return b
}
