package main

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumes"
)

// The CLI's list prints every Machine's volumes, then a note per Machine
// that has no pool or did not answer (volumes.MachineVolumes.Note).
func TestPrintVolumeList(t *testing.T) {
	ms := []volumes.MachineVolumes{
		{Machine: "m1", List: &rpc.VolumeList{Pool: "ployz", Volumes: []rpc.Volume{{Name: "db", SizeBytes: 1 << 30, UsedBytes: 1 << 20, Mountpoint: "/var/lib/ployz/volumes/db",
			Snapshots: []rpc.VolumeSnapshot{{Name: "s1"}}, Copy: &rpc.VolumeCopy{Role: "writer"}}}}},
		{Machine: "m2", List: &rpc.VolumeList{}},
		{Machine: "m3", Error: "down"},
	}
	var b strings.Builder
	printVolumeList(&b, ms)
	for _, want := range []string{"m1       db    writer  1GiB  1MiB  1          /var/lib/ployz/volumes/db",
		"m2: no ZFS pool, no Provisioned Volumes (`ployz machine update m2 --zfs-pool NAME`)", "m3: no answer: down"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("list lacks %q:\n%s", want, b.String())
		}
	}
}
