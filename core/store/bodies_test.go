package store

import (
	"testing"

	"github.com/ployz/ployz/internal/bodyfixture"
)

// TestBodyFixtures pins the JSON of the replicated bodies only ployzd and
// the operator use (docs/formats.md, "Stable promise"; sdk/store pins the
// rows a plugin reads or owns): each entry decodes, re-encodes
// byte-identically, and still decodes with a field a newer writer added
// (bodyfixture.Check).
func TestBodyFixtures(t *testing.T) {
	bodyfixture.Check(t, "testdata/bodies.json", map[string]any{
		"history":       &HistoryBody{},
		"revision":      &RevisionBody{},
		"deploy_record": &DeployRecordBody{},
		"lease":         &LeaseBody{},
		"volume_run":    &VolumeRunBody{},
		"allocation":    &AllocationBody{},
		"removal":       &RemovalBody{},
		"job":           &JobBody{},
		"job_run":       &JobRunBody{},
		"volume_policy": &VolumePolicyBody{},
	})
}
