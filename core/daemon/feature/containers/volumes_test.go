package containers

import (
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// TestAdmitVolumes: a Container bind-mounting a Provisioned Volume is
// admitted only where this Machine's copy is the Writer.
func TestAdmitVolumes(t *testing.T) {
	copies := map[string]volumecopy.Copy{"db": {Role: volumecopy.Writer, Epoch: 1}, "logs": {Role: volumecopy.Mirror}}
	f := Facts{Name: "m1", Copies: copies}
	bind := func(src string) rpc.ContainerSpec {
		return rpc.ContainerSpec{Mounts: []rpc.MountSpec{{Type: "tmpfs", Target: "/tmp"}, {Type: "bind", Source: src, Target: "/data"}}}
	}
	for _, c := range []struct {
		src, refused string
	}{
		{"/var/lib/ployz/volumes/db", ""},
		{"/var/lib/ployz/volumes/db/sub/dir", ""},
		{"/srv/data", ""},
		{"/var/lib/ployz/volumes-other/x", ""},
		{"/var/lib/ployz/volumes/logs", "is mirror, not the Writer"},
		{"/var/lib/ployz/volumes/nosuch", "is none, not the Writer"},
		{"/var/lib/ployz/volumes/../volumes/logs/", "is mirror"},
		{"/var/lib/ployz/volumes", "every Provisioned Volume"},
	} {
		err := admitVolumes(bind(c.src), f)
		if c.refused == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.src, err)
			}
			continue
		}
		var e *rpc.Error
		if !errors.As(err, &e) || e.Code != rpc.CodeFailedPrecond || !strings.Contains(e.Message, c.refused) || e.Details["field"] != "spec.mounts[1].source" {
			t.Errorf("%s: %v, want failed_precondition naming spec.mounts[1].source, %q", c.src, err, c.refused)
		}
	}
	// A named Docker volume is not a Provisioned Volume.
	if err := admitVolumes(rpc.ContainerSpec{Mounts: []rpc.MountSpec{{Type: "volume", Source: "db", Target: "/d"}}}, Facts{}); err != nil {
		t.Errorf("docker volume refused: %v", err)
	}
}

// TestWriterCopies: list_containers reports only the Writer copies, sorted,
// for the planner's volume locality.
func TestWriterCopies(t *testing.T) {
	got := writerCopies(map[string]volumecopy.Copy{
		"web": {Role: volumecopy.Writer}, "logs": {Role: volumecopy.Mirror}, "db": {Role: volumecopy.Writer}, "old": {},
	})
	if strings.Join(got, ",") != "db,web" {
		t.Fatalf("writerCopies = %v, want [db web]", got)
	}
	if writerCopies(nil) != nil {
		t.Fatal("no copies: want nil (omitted from the answer)")
	}
}
