package client

import (
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/internal/fakecluster"
)

// newFake is a fake Cluster and a Session on it (context "lab").
func newFake(t *testing.T, names ...string) (*fakecluster.Cluster, *Session) {
	fc := fakecluster.New(t, names...)
	return fc, New(fc.Store, fc.Entry, "lab")
}

// drained says whether m2 carries the drained label.
func drained(fc *fakecluster.Cluster) bool {
	_, ok := fc.Machine("m2").Label(deploy.LabelDrained)
	return ok
}
