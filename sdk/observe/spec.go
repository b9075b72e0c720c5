package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Capability names. A logstore plugin advertises CapTailLogs and
// CapLogHistory; a metrics plugin CapQueryMetrics. ployzd serves the
// Machine RPCs tail_logs, log_history and query_metrics only while a
// healthy plugin advertises the matching name.
const (
	CapTailLogs     = "ployz.logs.tail.v1"
	CapLogHistory   = "ployz.logs.history.v1"
	CapQueryMetrics = "ployz.metrics.query.v1"
)

// Defaults of Spec.
const (
	DefaultDockerRoot   = "/var/lib/docker"
	DefaultStateDir     = "/var/lib/ployz/observe"
	DefaultMaxBytes     = 2 << 30 // the whole Observe Store: logs and metrics
	DefaultMaxAge       = 7 * 24 * time.Hour
	DefaultMinFreeBytes = 1 << 30
	// DefaultLogSpecPath and DefaultMetricsSpecPath are where the two
	// plugins keep the spec Configure gave them (sdk.KeepConfig).
	DefaultLogSpecPath     = "/var/lib/ployz/observe/logstore.json"
	DefaultMetricsSpecPath = "/var/lib/ployz/observe/metrics.json"
)

// Spec configures an Observe Store plugin. Every field is optional: an
// empty spec (or none at all) serves with the defaults, so a plugin never
// waits for ployzd before it keeps Container output.
type Spec struct {
	// MachineID names this Machine in answers.
	MachineID string `json:"machine_id,omitempty"`
	// DockerRoot is Docker's data root (`docker info`'s DockerRootDir).
	DockerRoot string `json:"docker_root,omitempty"`
	// StateDir holds the store: <StateDir>/logs and <StateDir>/metrics.
	StateDir string `json:"state_dir,omitempty"`
	Budget   Budget `json:"budget"`
	// MetricsListen is the host:port the metrics plugin serves Prometheus'
	// text format on (GET /metrics), normally the Machine's mesh address;
	// empty serves none.
	MetricsListen string `json:"metrics_listen,omitempty"`
	// CountersFile is the file ployzd keeps its Counters in, which the
	// metrics plugin serves on its endpoint; empty reads none.
	CountersFile string `json:"counters_file,omitempty"`
}

// Budget is the disk the Observe Store may use, shared by logs and
// metrics: when their sum passes MaxBytes, or the filesystem's free space
// falls below MinFreeBytes, the logstore deletes its oldest hour first.
// Logs older than MaxAgeSeconds are deleted too.
type Budget struct {
	MaxBytes      int64 `json:"max_bytes,omitempty"`
	MaxAgeSeconds int64 `json:"max_age_seconds,omitempty"`
	MinFreeBytes  int64 `json:"min_free_bytes,omitempty"`
}

// MaxAge is MaxAgeSeconds as a duration.
func (b Budget) MaxAge() time.Duration { return time.Duration(b.MaxAgeSeconds) * time.Second }

// LogsDir and MetricsDir are where each plugin keeps its data.
func (s Spec) LogsDir() string    { return filepath.Join(s.StateDir, "logs") }
func (s Spec) MetricsDir() string { return filepath.Join(s.StateDir, "metrics") }

// ParseSpec reads a spec, fills in the defaults and validates it. Empty
// input (or JSON null) is the default spec. Unknown fields are ignored so
// an older plugin reads a newer ployzd's spec.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if t := bytes.TrimSpace(b); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &s); err != nil {
			return Spec{}, fmt.Errorf("observe spec: %w", err)
		}
	}
	if s.DockerRoot == "" {
		s.DockerRoot = DefaultDockerRoot
	}
	if s.StateDir == "" {
		s.StateDir = DefaultStateDir
	}
	if s.Budget.MaxBytes == 0 {
		s.Budget.MaxBytes = DefaultMaxBytes
	}
	if s.Budget.MaxAgeSeconds == 0 {
		s.Budget.MaxAgeSeconds = int64(DefaultMaxAge / time.Second)
	}
	if s.Budget.MinFreeBytes == 0 {
		s.Budget.MinFreeBytes = DefaultMinFreeBytes
	}
	switch {
	case !filepath.IsAbs(s.DockerRoot):
		return Spec{}, fmt.Errorf("observe spec field \"docker_root\": %q is not an absolute path", s.DockerRoot)
	case s.CountersFile != "" && !filepath.IsAbs(s.CountersFile):
		return Spec{}, fmt.Errorf("observe spec field \"counters_file\": %q is not an absolute path", s.CountersFile)
	case !filepath.IsAbs(s.StateDir):
		return Spec{}, fmt.Errorf("observe spec field \"state_dir\": %q is not an absolute path", s.StateDir)
	case s.Budget.MaxBytes < 0:
		return Spec{}, fmt.Errorf("observe spec field \"budget.max_bytes\": %d is negative", s.Budget.MaxBytes)
	case s.Budget.MaxAgeSeconds < 0:
		return Spec{}, fmt.Errorf("observe spec field \"budget.max_age_seconds\": %d is negative", s.Budget.MaxAgeSeconds)
	case s.Budget.MinFreeBytes < 0:
		return Spec{}, fmt.Errorf("observe spec field \"budget.min_free_bytes\": %d is negative", s.Budget.MinFreeBytes)
	}
	return s, nil
}

// LoadSpec reads the spec kept at path; a missing file is the default spec.
func LoadSpec(path string) (Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return Spec{}, fmt.Errorf("observe spec: %w", err)
	}
	s, err := ParseSpec(b)
	if err != nil {
		return Spec{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
