package zfsvol

import (
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk/volume"
)

// FuzzResumeTarget feeds checkResumeTarget any zfs send -nvt output, pool
// and volume name: an accepted token always resumes a snapshot of that
// volume (or, without a name, of a volume of that pool), and a refusal is
// always InvalidArgument naming the field.
func FuzzResumeTarget(f *testing.F) {
	rec, err := os.ReadFile("testdata/send-nvt.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("tank", "db", string(rec))
	f.Add("tank", "", string(rec))
	f.Add("tank", "web", string(rec))
	f.Add("tank", "db", "\ttoname = tank/ployz/volumes/db/x@s\n")
	f.Add("tank", "", "\ttoname = tank/ployz/volumes/../secrets@s\n")
	f.Add("tank", "", "\ttoname = tank/ployz/volumes/db@s\n\ttoname = tank/secrets@s\n")
	f.Add("ployz", "db", "\ttoname = ployz/ployz/volumes/db@\n")
	f.Fuzz(func(t *testing.T, pool, name, contents string) {
		if volume.ValidPool(pool) != nil || (name != "" && volume.ValidName(name) != nil) {
			return // resumeArgs checks both before asking zfs
		}
		err := checkResumeTarget(pool, name, contents)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "resume_token: ") {
				t.Fatalf("refusal %v is not an InvalidArgument naming resume_token", err)
			}
			return
		}
		toname, ok := tokenToname(contents)
		ds, _, isSnap := strings.Cut(toname, "@")
		if !ok || !isSnap {
			t.Fatalf("accepted a token naming no snapshot: %q", toname)
		}
		if name != "" {
			if ds != dataset(pool, name) {
				t.Fatalf("accepted %q for volume %q of pool %q", toname, name, pool)
			}
			return
		}
		rest, inPool := strings.CutPrefix(ds, pool+"/"+VolumesDataset+"/")
		if !inPool || volume.ValidName(rest) != nil {
			t.Fatalf("accepted %q, no volume of pool %q", toname, pool)
		}
	})
}
