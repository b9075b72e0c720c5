package zfsvol

import (
	"bytes"
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ployz/ployz/sdk/volume"
)

// resumeArgs are the zfs arguments resuming the stream token names, once
// the token is known to continue a stream of volume name (any volume of
// the pool when name is empty). zfs send -t sends whatever dataset the
// token names, so a caller holding a token of another dataset would read
// it through a request naming this one.
func resumeArgs(ctx context.Context, pool, name, token string) ([]string, error) {
	if name != "" {
		if err := checkName("volume", name, volume.ValidName); err != nil {
			return nil, err
		}
	}
	// zfs itself decodes the token: -n sends nothing, -v prints its
	// contents (toname among them) on stdout.
	var out bytes.Buffer
	if _, err := run(ctx, nil, &out, "send", "-nvt", token); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "resume_token: %v", err)
	}
	if err := checkResumeTarget(pool, name, out.String()); err != nil {
		return nil, err
	}
	return []string{"send", "-t", token}, nil
}

// checkResumeTarget refuses the token whose contents (zfs send -nvt's
// output) resume a snapshot of another dataset than volume name's, or,
// without a name, of a dataset that is no volume of pool.
func checkResumeTarget(pool, name, contents string) error {
	toname, ok := tokenToname(contents)
	if !ok {
		return status.Errorf(codes.InvalidArgument, "resume_token: zfs send -nvt names no snapshot (toname) in it")
	}
	ds, _, isSnap := strings.Cut(toname, "@")
	parent := pool + "/" + VolumesDataset + "/"
	if name == "" {
		rest, inPool := strings.CutPrefix(ds, parent)
		if !isSnap || !inPool || volume.ValidName(rest) != nil {
			return status.Errorf(codes.InvalidArgument, "resume_token: the token resumes %s, which is not a volume of pool %s (%s<name>)", toname, pool, parent)
		}
		return nil
	}
	if want := dataset(pool, name); !isSnap || ds != want {
		return status.Errorf(codes.InvalidArgument, "resume_token: the token resumes %s, not volume %q (%s)", toname, name, want)
	}
	return nil
}

// tokenToname reads toname from the token's contents as zfs prints them:
// one top-level nvlist pair per line, "\ttoname = pool/fs@snap".
func tokenToname(contents string) (string, bool) {
	for _, l := range strings.Split(contents, "\n") {
		if v, ok := strings.CutPrefix(l, "\ttoname = "); ok {
			v = strings.TrimSpace(v)
			return v, v != ""
		}
	}
	return "", false
}
