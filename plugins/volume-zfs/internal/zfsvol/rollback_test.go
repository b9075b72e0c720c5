package zfsvol

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	volumev1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/volume/v1"
)

// The rollback commands are not in the recorded session yet (recording
// needs a VM lab Machine's pool; the VM volume scenario runs the real
// zfs rollback). This session is written by hand from zfs 2.1's outputs
// as the recorded one shows them, and replayed by the same double: it
// pins which commands Rollback runs, in which order, and what it makes
// of their answers.

const (
	rbPool = "zpool get -Hp name,health,allocated,size,free,readonly,dedupratio,fragmentation,freeing,leaked ployz"
	rbDS   = "ployz/ployz/volumes/db"
)

// rbSession writes a session of steps (each "cmd arg arg..." with its
// stdout, stderr and exit) and answers its path.
func rbSession(t *testing.T, steps ...step) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(session{Recorded: "written by hand (rollback_test.go)", Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sessionFile)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func rbStep(cmdline, stdout string, exit int) step {
	f := strings.Fields(cmdline)
	st := step{Cmd: f[0], Args: f[1:], Stdout: stdout, Exit: exit}
	if exit != 0 {
		st.Stdout, st.Stderr = "", stdout
	}
	return st
}

// rbOpen are the steps finding volume db with snapshots s1, s2 and s3,
// as lockedSnapshots runs them (the bookmarks are the next step's).
func rbOpen() []step {
	pool := "ployz\tname\tployz\t-\nployz\thealth\tONLINE\t-\nployz\tallocated\t115200\t-\nployz\tsize\t2013265920\t-\nployz\tfree\t2013150720\t-\nployz\treadonly\toff\t-\nployz\tdedupratio\t1.00\t-\nployz\tfragmentation\t0\t-\nployz\tfreeing\t0\t-\nployz\tleaked\t0\t-\n"
	return []step{
		rbStep(rbPool, pool, 0),
		rbStep("zfs list -Hp -o name,origin,used,available,mountpoint,compression,type,volsize,quota,referenced,written,logicalused,usedbydataset "+rbDS,
			rbDS+"\t-\t24576\t67084288\t/var/lib/ployz/volumes/db\toff\tfilesystem\t-\t67108864\t24576\t24576\t12288\t24576\n", 0),
		rbStep("zfs list -Hp -t snapshot -d 1 -s createtxg -o name,creation,used,guid "+rbDS,
			rbDS+"@s1\t1796507400\t0\t111\n"+rbDS+"@s2\t1796507500\t4096\t222\n"+rbDS+"@s3\t1796507600\t0\t333\n", 0),
	}
}

// rbInfo are info's steps after the rollback to s1.
func rbInfo() []step {
	return []step{
		rbStep("zfs get -Hp -o property,value creation,receive_resume_token,readonly "+rbDS, "creation\t1796507393\nreceive_resume_token\t-\nreadonly\toff\n", 0),
		rbStep("zfs list -Hp -t snapshot -d 1 -s createtxg -o name,creation,used,guid "+rbDS, rbDS+"@s1\t1796507400\t0\t111\n", 0),
		rbStep("zfs list -Hp -t bookmark -d 1 -s createtxg -o name,creation,guid "+rbDS, rbDS+"#run-1\t1796507400\t111\n", 0),
	}
}

func TestRollbackAgainstZFSDouble(t *testing.T) {
	ctx := context.Background()
	bookmarksStep := func(marks bool) step {
		out := ""
		if marks {
			out = rbDS + "#run-1\t1796507400\t111\n" + rbDS + "#run-2\t1796507500\t222\n"
		}
		return rbStep("zfs list -Hp -t bookmark -d 1 -s createtxg -o name,creation,guid "+rbDS, out, 0)
	}
	t.Run("newer snapshots refused without destroy_newer, naming them", func(t *testing.T) {
		useDouble(t, rbSession(t, append(rbOpen(), bookmarksStep(true))...))
		m := &Manager{pool: "ployz"}
		_, _, err := m.Rollback(ctx, "db", "s1", false)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("got %v, want failed_precondition", err)
		}
		for _, w := range []string{"snapshot:", `"s1"`, "s2, s3, #run-2", "destroy_newer"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v does not say %q", err, w)
			}
		}
	})
	t.Run("a snapshot it does not have is not_found, naming it", func(t *testing.T) {
		useDouble(t, rbSession(t, rbOpen()...))
		m := &Manager{pool: "ployz"}
		_, _, err := m.Rollback(ctx, "db", "nope", true)
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `no snapshot "nope" (it has: s1, s2, s3)`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("destroy_newer rolls back with -r and answers what went", func(t *testing.T) {
		steps := append(rbOpen(), bookmarksStep(true), rbStep("zfs rollback -r "+rbDS+"@s1", "", 0))
		useDouble(t, rbSession(t, append(steps, rbInfo()...)...))
		m := &Manager{pool: "ployz"}
		s := &Server{M: m}
		resp, err := s.Rollback(ctx, &volumev1.RollbackRequest{Volume: "db", Snapshot: "s1", DestroyNewer: true})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"s2", "s3", "#run-2"}; !slices.Equal(resp.GetDestroyed(), want) {
			t.Errorf("destroyed %q, want %q", resp.GetDestroyed(), want)
		}
		if got := resp.GetVolume().GetSnapshots(); !slices.Equal(got, []string{"s1"}) {
			t.Errorf("snapshots after: %q", got)
		}
	})
	t.Run("the newest snapshot needs no -r; zfs's refusal is reported", func(t *testing.T) {
		open := rbOpen()
		// Only s1: nothing newer.
		open[2] = rbStep("zfs list -Hp -t snapshot -d 1 -s createtxg -o name,creation,used,guid "+rbDS, rbDS+"@s1\t1796507400\t0\t111\n", 0)
		steps := append(open, bookmarksStep(false),
			rbStep("zfs rollback "+rbDS+"@s1", "cannot rollback to 'ployz/ployz/volumes/db@s1': more recent snapshots or bookmarks exist\n", 1))
		useDouble(t, rbSession(t, steps...))
		m := &Manager{pool: "ployz"}
		_, _, err := m.Rollback(ctx, "db", "s1", false)
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "more recent snapshots") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("bad names refused before any command", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir()) // no zfs at all: a command run would fail otherwise
		m := &Manager{pool: "ployz"}
		if _, _, err := m.Rollback(ctx, "db", "a@b", false); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "snapshot:") {
			t.Errorf("bad snapshot: %v", err)
		}
		if _, _, err := m.Rollback(ctx, "DB!", "s1", false); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "volume:") {
			t.Errorf("bad volume: %v", err)
		}
	})
}

func TestRollbackCommand(t *testing.T) {
	if got := rollbackCommand(rbDS, "s1", false); !slices.Equal(got, []string{"rollback", rbDS + "@s1"}) {
		t.Errorf("no newer: %q", got)
	}
	if got := rollbackCommand(rbDS, "s1", true); !slices.Equal(got, []string{"rollback", "-r", rbDS + "@s1"}) {
		t.Errorf("newer: %q", got)
	}
}
