package rpc

import (
	"encoding/json"
	"regexp"

	"github.com/ployz/ployz/core/store"
)

// Volume Runs in the Cluster: the operator library begins each run
// through its entry, which numbers it above every gen of the volume the
// Cluster holds and marks lost the open runs whose driver's volume lease
// is gone; the run's record is rewritten as it goes (put_volume_run), so
// any operator lists every operator's runs and finishes a Move another
// left (docs/formats.md).
const (
	CmdBeginVolumeRun = "begin_volume_run"
	CapBeginVolumeRun = "ployz.operator.begin_volume_run.v1"
	CmdPutVolumeRun   = "put_volume_run"
	CapPutVolumeRun   = "ployz.operator.put_volume_run.v1"
	CmdListVolumeRuns = "list_volume_runs"
	CapListVolumeRuns = "ployz.operator.list_volume_runs.v1"
)

// Volume Run states as the Cluster checks them (core/operator's Run*).
var volumeRunStates = map[string]bool{"open": true, "done": true, "failed": true, "cancelled": true, "lost": true, "undone": true}

// volumeNameRe is sdk/volume's name rule (this package does not import
// the plugin contracts).
var volumeNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// maxVolumeRunBytes bounds one run's record.
const maxVolumeRunBytes = 256 << 10

// BeginVolumeRunRequest opens a run of Kind on Volume. Run is the new
// run's record (core/operator.VolumeRun's JSON; the entry's gen replaces
// its gen). LeaseNonce is the volume:<Volume> lease the caller holds
// ("": none): an open run whose driver's lease is gone is marked lost,
// one still held refuses the new run. Floor is the highest floor the
// volume's copies showed: the gen is above it too.
type BeginVolumeRunRequest struct {
	Volume     string                `json:"volume"`
	Kind       string                `json:"kind"`
	Floor      uint64                `json:"floor,omitempty"`
	StartedAt  int64                 `json:"started_at"`
	Operator   store.HistoryOperator `json:"operator"`
	LeaseNonce string                `json:"lease_nonce,omitempty"`
	Run        json.RawMessage       `json:"run"`
}

// VolumeRunBegun answers begin_volume_run: the run's gen and the gens of
// the open runs it marked lost.
type VolumeRunBegun struct {
	Gen  uint64   `json:"gen"`
	Lost []uint64 `json:"lost,omitempty"`
}

// PutVolumeRunRequest rewrites a begun run's record (its steps, its
// end). With Import it writes a run only when the Cluster has none of
// that volume and gen (an operator store's run from before the Cluster
// kept them); Operator and StartedAt are an import's only.
type PutVolumeRunRequest struct {
	Volume    string                `json:"volume"`
	Gen       uint64                `json:"gen"`
	Kind      string                `json:"kind,omitempty"`
	State     string                `json:"state"`
	Error     string                `json:"error,omitempty"`
	StartedAt int64                 `json:"started_at,omitempty"`
	UpdatedAt int64                 `json:"updated_at"`
	Operator  store.HistoryOperator `json:"operator,omitzero"`
	Import    bool                  `json:"import,omitempty"`
	Run       json.RawMessage       `json:"run"`
}

// VolumeRunPut answers put_volume_run; Existing says an import found the
// run there and wrote nothing.
type VolumeRunPut struct {
	Existing bool `json:"existing,omitempty"`
}

// ListVolumeRunsRequest asks for the newest Limit runs (0: 50) of Volume
// ("" for all), of Kind when set.
type ListVolumeRunsRequest struct {
	Volume string `json:"volume,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// VolumeRunList answers list_volume_runs, newest first: the rows'
// bodies, an open run whose driver's lease is gone answered lost.
type VolumeRunList struct {
	Runs []store.VolumeRunBody `json:"runs"`
}

func validVolume(v string) error {
	if !volumeNameRe.MatchString(v) {
		return InvalidField("volume", "%q: want a volume name (1-63 of a-z 0-9 _ . -)", clip(v))
	}
	return nil
}

func validRunKind(k string) error {
	if k == "" || len(k) > 32 || !isToken(k) {
		return InvalidField("kind", "%q: want a run kind (mirror, move, ...)", clip(k))
	}
	return nil
}

func validRunRecord(run json.RawMessage) error {
	if len(run) == 0 || run[0] != '{' || len(run) > maxVolumeRunBytes || !json.Valid(run) {
		return InvalidField("run", "want a JSON object of at most %d bytes", maxVolumeRunBytes)
	}
	return nil
}

func validRunOperator(op store.HistoryOperator) error {
	if op.Name == "" || len(op.Name) > 128 || !printable(op.Name) {
		return InvalidField("operator.name", "%q: want 1 to 128 printable characters", clip(op.Name))
	}
	return nil
}

// Validate refuses a malformed request, naming the field.
func (r BeginVolumeRunRequest) Validate() error {
	if err := validVolume(r.Volume); err != nil {
		return err
	}
	if err := validRunKind(r.Kind); err != nil {
		return err
	}
	if r.StartedAt <= 0 {
		return InvalidField("started_at", "%d: want unix milliseconds", r.StartedAt)
	}
	if err := validRunOperator(r.Operator); err != nil {
		return err
	}
	if len(r.LeaseNonce) > 128 {
		return InvalidField("lease_nonce", "%d characters: at most 128", len(r.LeaseNonce))
	}
	return validRunRecord(r.Run)
}

// Validate refuses a malformed request, naming the field.
func (r PutVolumeRunRequest) Validate() error {
	if err := validVolume(r.Volume); err != nil {
		return err
	}
	switch {
	case r.Gen == 0 || r.Gen > 1<<53:
		return InvalidField("gen", "%d: a run's gen is a number from 1", r.Gen)
	case !volumeRunStates[r.State]:
		return InvalidField("state", "%q: want open, done, failed, cancelled, lost or undone", clip(r.State))
	case len(r.Error) > 4096:
		return InvalidField("error", "%d bytes: at most 4096", len(r.Error))
	case r.UpdatedAt <= 0:
		return InvalidField("updated_at", "%d: want unix milliseconds", r.UpdatedAt)
	}
	if r.Import {
		if err := validRunKind(r.Kind); err != nil {
			return err
		}
		if r.StartedAt <= 0 {
			return InvalidField("started_at", "%d: want unix milliseconds", r.StartedAt)
		}
		if err := validRunOperator(r.Operator); err != nil {
			return err
		}
	}
	return validRunRecord(r.Run)
}

// Validate refuses a malformed request, naming the field.
func (r ListVolumeRunsRequest) Validate() error {
	switch {
	case r.Volume != "" && !volumeNameRe.MatchString(r.Volume):
		return InvalidField("volume", "%q: want a volume name (1-63 of a-z 0-9 _ . -)", clip(r.Volume))
	case r.Kind != "" && (len(r.Kind) > 32 || !isToken(r.Kind)):
		return InvalidField("kind", "%q: want a run kind (mirror, move, ...)", clip(r.Kind))
	case r.Limit < 0 || r.Limit > HistoryMaxLimit:
		return InvalidField("limit", "%d: want 1 to %d (0: %d)", r.Limit, HistoryMaxLimit, HistoryDefaultLimit)
	}
	return nil
}
