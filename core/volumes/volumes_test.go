package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

type fanout struct {
	fr  rpc.FanoutResult
	err error
	got []string
}

func (f *fanout) Fanout(_ context.Context, t rpc.Target, command string, _ any) (rpc.FanoutResult, error) {
	f.got = append(f.got, command)
	return f.fr, f.err
}

// m1's payload is list_volumes' wire form as ployzd writes it; m2 has no
// pool; m3 refused; m4 was not reached; m5 answered garbage.
func TestList(t *testing.T) {
	m1 := `{"machine_id":"id1","pool":"tank","health":"ONLINE","free_bytes":1073741824,"volumes":[{"machine_id":"id1","name":"db","pool":"tank",
		"dataset":"tank/ployz/volumes/db","mountpoint":"/var/lib/ployz/volumes/db","size_bytes":1073741824,"used_bytes":24576,
		"created_unix_nano":1764670000000000000,"snapshots":[{"name":"s1","created_unix_nano":1764670001000000000,"used_bytes":0,"guid":"123"}],"later_field":true}]}`
	f := &fanout{fr: rpc.FanoutResult{
		Results: []rpc.TargetResult{
			{MachineID: "id3", MachineName: "m3", Error: rpc.Errorf(rpc.CodeUnavailable, "capability ployz.volume.list.v1 not served")},
			{MachineID: "id1", MachineName: "m1", Payload: json.RawMessage(m1)},
			{MachineID: "id2", MachineName: "m2", Payload: json.RawMessage(`{"machine_id":"id2","volumes":[]}`)},
			{MachineID: "id5", Payload: json.RawMessage(`[]`)},
		},
		Omitted: []rpc.Omission{{MachineID: "id4", MachineName: "m4", Reason: "down"}},
	}}
	ms, err := List(context.Background(), f, rpc.Target{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.got, []string{rpc.CmdListVolumes}) {
		t.Fatalf("asked %v", f.got)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.Machine)
	}
	if !slices.Equal(names, []string{"id5", "m1", "m2", "m3", "m4"}) {
		t.Fatalf("machines %v", names)
	}
	db := ms[1].List.Volumes[0]
	if ms[1].MachineID != "id1" || ms[1].List.Pool != "tank" || db.SizeBytes != 1<<30 || db.UsedBytes != 24576 || len(db.Snapshots) != 1 || db.Snapshots[0].GUID != "123" {
		t.Fatalf("m1 %+v", ms[1])
	}
	if !ms[2].NoPool() || !strings.Contains(ms[2].Note(), "no ZFS pool") || !strings.Contains(ms[2].Note(), "ployz machine update m2 --zfs-pool NAME") {
		t.Errorf("m2 %+v note %q", ms[2], ms[2].Note())
	}
	if ms[1].NoPool() || ms[1].Note() != "" {
		t.Errorf("m1 has a pool: %q", ms[1].Note())
	}
	if ms[3].NoPool() || !strings.Contains(ms[3].Note(), "no answer: ") || !strings.Contains(ms[3].Note(), "not served") {
		t.Errorf("m3 note %q", ms[3].Note())
	}
	if ms[4].Error != "down" || ms[4].MachineID != "id4" {
		t.Errorf("m4 %+v", ms[4])
	}
	if !strings.HasPrefix(ms[0].Error, "malformed list_volumes answer") {
		t.Errorf("id5 %+v", ms[0])
	}
	if got := Unanswered(ms); !slices.Equal(got, []string{"id5", "m3", "m4"}) {
		t.Errorf("unanswered %v", got)
	}

	f.err = errors.New("entry gone")
	if _, err := List(context.Background(), f, rpc.Target{All: true}); err == nil || !strings.Contains(err.Error(), "list volumes: entry gone") {
		t.Errorf("fan-out error %v", err)
	}
}

func TestHolders(t *testing.T) {
	ms := []MachineVolumes{
		{Machine: "m1", List: &rpc.VolumeList{Pool: "ployz", Volumes: []rpc.Volume{{Name: "db"}, {Name: "cache"}}}},
		{Machine: "m2", List: &rpc.VolumeList{}},
		{Machine: "m3", Error: "down"},
		{Machine: "m4", List: &rpc.VolumeList{Pool: "tank", Volumes: []rpc.Volume{{Name: "db"}}}},
	}
	if got := Holders(ms, "db"); !slices.Equal(got, []string{"m1", "m4"}) {
		t.Errorf("Holders(db) = %v", got)
	}
	if got := Holders(ms, "x"); len(got) != 0 {
		t.Errorf("Holders(x) = %v", got)
	}
	if got := Unanswered(ms); !slices.Equal(got, []string{"m3"}) {
		t.Errorf("Unanswered = %v", got)
	}
}

func container(machineID, name, svc, state string, mounts ...rpc.MountSpec) rpc.ContainerObservation {
	return rpc.ContainerObservation{MachineID: machineID, Name: name, Namespace: "app-prod", Service: svc, State: state, Spec: &rpc.ContainerSpec{Mounts: mounts}}
}

func TestMounts(t *testing.T) {
	vol := func(name string) rpc.Volume {
		return rpc.Volume{Name: name, Mountpoint: "/var/lib/ployz/volumes/" + name}
	}
	ms := []MachineVolumes{
		{Machine: "m1", MachineID: "id1", List: &rpc.VolumeList{MachineID: "id1", Pool: "tank", Volumes: []rpc.Volume{vol("db"), vol("dbx")}}},
		{Machine: "m2", MachineID: "id2", List: &rpc.VolumeList{MachineID: "id2"}},
		{Machine: "m3", MachineID: "id3", Error: "down"},
	}
	bind := func(src, dst string) rpc.MountSpec { return rpc.MountSpec{Type: "bind", Source: src, Target: dst} }
	cs := []rpc.ContainerObservation{
		container("id1", "web-2", "web", "running", bind("/var/lib/ployz/volumes/db/uploads/", "/up"), bind("/etc/hosts", "/etc/hosts")),
		container("id1", "db-1", "db", "exited", rpc.MountSpec{Type: "bind", Source: "/var/lib/ployz/volumes/db", Target: "/data", ReadOnly: true}),
		// A volume named db is not the one named dbx, nor a sibling path.
		container("id1", "x-1", "x", "running", bind("/var/lib/ployz/volumes/dbx", "/x"), bind("/var/lib/ployz/volumes/dby", "/y"),
			rpc.MountSpec{Type: "volume", Source: "db", Target: "/v"}),
		{MachineID: "id1", Name: "nospec"},
		// The same path on a Machine that does not hold the volume is
		// not it.
		container("id2", "web-1", "web", "running", bind("/var/lib/ployz/volumes/db", "/data")),
		container("id3", "web-3", "web", "running", bind("/var/lib/ployz/volumes/db", "/data")),
	}
	got := Mounts(ms, cs)
	want := []Mount{
		{Machine: "m1", Volume: "db", Namespace: "app-prod", Service: "db", Container: "db-1", State: "exited", Path: "/var/lib/ployz/volumes/db", Target: "/data", ReadOnly: true},
		{Machine: "m1", Volume: "db", Namespace: "app-prod", Service: "web", Container: "web-2", State: "running", Path: "/var/lib/ployz/volumes/db/uploads/", Target: "/up"},
		{Machine: "m1", Volume: "dbx", Namespace: "app-prod", Service: "x", Container: "x-1", State: "running", Path: "/var/lib/ployz/volumes/dbx", Target: "/x"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Mounts =\n%+v\nwant\n%+v", got, want)
	}
	if !BindMounts(cs) || BindMounts([]rpc.ContainerObservation{container("id1", "a", "a", "running", rpc.MountSpec{Type: "tmpfs", Target: "/t"}), {Name: "b"}}) {
		t.Error("BindMounts")
	}
}
