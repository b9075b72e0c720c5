package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/volume"
)

func TestWithZFSPool(t *testing.T) {
	l, err := withZFSPool(map[string]string{"a": "b"}, " tank ", true)
	if err != nil || l[volume.PoolLabel] != "tank" || l["a"] != "b" {
		t.Fatalf("withZFSPool = %v, %v", l, err)
	}
	if l, err := withZFSPool(nil, "", false); err != nil || l != nil {
		t.Fatalf("unset flag: %v, %v", l, err)
	}
	for _, bad := range []string{"", "a/b", "mirror"} {
		if _, err := withZFSPool(nil, bad, true); err == nil || !strings.Contains(err.Error(), "--zfs-pool") {
			t.Errorf("withZFSPool(%q) = %v, want an error naming --zfs-pool", bad, err)
		}
	}
}

func TestHolders(t *testing.T) {
	ms := []machineVolumes{
		{Machine: "m1", List: &rpc.VolumeList{Pool: "ployz", Volumes: []rpc.Volume{{Name: "db"}, {Name: "cache"}}}},
		{Machine: "m2", List: &rpc.VolumeList{}},
		{Machine: "m3", Error: "down"},
		{Machine: "m4", List: &rpc.VolumeList{Pool: "tank", Volumes: []rpc.Volume{{Name: "db"}}}},
	}
	if got := holders(ms, "db"); !slices.Equal(got, []string{"m1", "m4"}) {
		t.Errorf("holders(db) = %v", got)
	}
	if got := holders(ms, "x"); len(got) != 0 {
		t.Errorf("holders(x) = %v", got)
	}
	if got := unanswered(ms); got != " (no answer from m3)" {
		t.Errorf("unanswered = %q", got)
	}
}
