package zfsvol

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestResumeTokenChecksTheVolume reads testdata/send-nvt.txt, what
// `zfs send -nvt TOKEN` prints (OpenZFS 2.x: the token's nvlist, then the
// estimate) for a token resuming tank/ployz/volumes/db@run-3: a request
// naming another volume, or naming none and reaching outside the pool's
// volumes, is refused naming both datasets.
func TestResumeTokenChecksTheVolume(t *testing.T) {
	b, err := os.ReadFile("testdata/send-nvt.txt")
	if err != nil {
		t.Fatal(err)
	}
	recorded := string(b)
	other := func(toname string) string {
		return strings.Replace(recorded, "tank/ployz/volumes/db@run-3", toname, 1)
	}
	for _, tc := range []struct {
		name, pool, volume, contents string
		refused                      []string // each in the message; none: accepted
	}{
		{"its volume", "tank", "db", recorded, nil},
		{"any volume of the pool", "tank", "", recorded, nil},
		{"another volume", "tank", "web", recorded, []string{"tank/ployz/volumes/db@run-3", `"web"`, "tank/ployz/volumes/web"}},
		{"a volume whose name extends it", "tank", "db", other("tank/ployz/volumes/dbx@run-3"), []string{"tank/ployz/volumes/dbx@run-3", `"db"`}},
		{"another pool", "data", "", recorded, []string{"tank/ployz/volumes/db@run-3", "pool data"}},
		{"a dataset outside the volumes", "tank", "", other("tank/secrets@s1"), []string{"tank/secrets@s1"}},
		{"a child of a volume", "tank", "", other("tank/ployz/volumes/db/child@s1"), []string{"tank/ployz/volumes/db/child@s1"}},
		{"not a snapshot", "tank", "db", other("tank/ployz/volumes/db"), []string{"tank/ployz/volumes/db"}},
		{"no toname", "tank", "db", "resume token contents:\nnvlist version: 0\n\tobject = 0x82\n", []string{"toname"}},
		{"toname nested deeper", "tank", "db", "nvlist version: 0\n\t\ttoname = tank/ployz/volumes/db@run-3\n", []string{"toname"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkResumeTarget(tc.pool, tc.volume, tc.contents)
			if tc.refused == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want an InvalidArgument refusal", err)
			}
			msg := status.Convert(err).Message()
			if !strings.HasPrefix(msg, "resume_token: ") {
				t.Fatalf("message %q does not name the field resume_token", msg)
			}
			for _, s := range tc.refused {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q does not name %s", msg, s)
				}
			}
		})
	}
}

// TestResumeArgsAsksZFS runs resumeArgs against a zfs stand-in that
// prints the recorded token contents for `zfs send -nvt TOKEN` only: the
// token goes to zfs send -t only for its own volume.
func TestResumeArgsAsksZFS(t *testing.T) {
	rec, err := filepath.Abs("testdata/send-nvt.txt")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\n[ \"$*\" = \"send -nvt 1-abc-d0-789c\" ] && exec /bin/cat '" + rec + "'\necho \"cannot resume send: bad token\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "zfs"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	ctx := context.Background()
	args, err := resumeArgs(ctx, "tank", "db", "1-abc-d0-789c")
	if err != nil || !slices.Equal(args, []string{"send", "-t", "1-abc-d0-789c"}) {
		t.Fatalf("own volume: %q, %v", args, err)
	}
	if _, err := resumeArgs(ctx, "tank", "web", "1-abc-d0-789c"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("another volume: %v, want InvalidArgument", err)
	}
	if _, err := resumeArgs(ctx, "tank", "db", "garbage"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "bad token") {
		t.Fatalf("a token zfs cannot read: %v, want FailedPrecondition with zfs's words", err)
	}
	if _, err := resumeArgs(ctx, "tank", "../x", "1-abc-d0-789c"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad volume name: %v, want InvalidArgument", err)
	}
}
