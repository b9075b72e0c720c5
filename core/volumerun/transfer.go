package volumerun

import (
	"errors"
	"fmt"
	"slices"
	"time"

	units "github.com/docker/go-units"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
)

// hasSnapshot is the GUID of v's snapshot named name, or "".
func hasSnapshot(v rpc.Volume, name string) string {
	for _, s := range v.Snapshots {
		if s.Name == name {
			return s.GUID
		}
	}
	return ""
}

// maxTransfers bounds the streams one send step starts (the first and
// the rests of cut ones).
const maxTransfers = 3

// transfer brings target's copy to the Writer's snapshot snap, continuing
// from what target's disk shows: nothing (a full stream), a resume token
// (the rest of a cut transfer), or the newest snapshot both hold (an
// incremental stream). It answers target's volume after.
func (r *volumeRun) transfer(writer string, wv rpc.Volume, snap, target string, tv *rpc.Volume) error {
	return r.step("send", target, func(st *operator.RunStep) error {
		guid := hasSnapshot(wv, snap)
		// Each round first reads what the last transfer left, so the last
		// allowed transfer's success is seen.
		for round := 0; ; round++ {
			if tv != nil && slices.ContainsFunc(tv.Snapshots, func(s rpc.VolumeSnapshot) bool { return s.GUID == guid }) {
				if round == 0 {
					st.Outcome, st.Detail = operator.StepSkipped, target+" holds "+snap
				}
				return nil
			}
			if round == maxTransfers {
				return fmt.Errorf("%s does not hold %s after %d transfers", target, snap, maxTransfers)
			}
			req, what, err := r.nextStream(writer, wv, snap, target, tv)
			if err != nil {
				return err
			}
			out, err := r.copyStream(volumeCopy{from: writer, to: target, req: req, resumable: true, what: what})
			st.Bytes += out.Bytes
			if st.Detail != "" {
				st.Detail += "; "
			}
			st.Detail += fmt.Sprintf("%s: %s", what, units.BytesSize(float64(out.Bytes)))
			if out.Direct {
				st.Detail += " direct"
			}
			if err != nil {
				if tv, err = r.resumeAfter(target, err); err != nil {
					return err
				}
				continue
			}
			tv = &out.Got.Volume
		}
	})
}

// nextStream is the stream that brings target (tv as last read) closer
// to snap, and its name for progress lines.
func (r *volumeRun) nextStream(writer string, wv rpc.Volume, snap, target string, tv *rpc.Volume) (rpc.SendVolumeRequest, string, error) {
	req := rpc.SendVolumeRequest{Volume: r.run.Volume, Snapshot: snap}
	switch {
	case tv != nil && tv.ResumeToken != "":
		return rpc.SendVolumeRequest{Volume: r.run.Volume, ResumeToken: tv.ResumeToken}, "the rest of a cut transfer", nil
	case tv != nil:
		base := commonBase(wv, *tv)
		if base == "" {
			return req, "", fmt.Errorf("%s holds %s with no snapshot in common with %s's: remove it there (`ployz volume rm %s --machine %s`) and mirror again",
				target, r.run.Volume, writer, r.run.Volume, target)
		}
		req.FromSnapshot = base
		return req, "incremental " + base + " → " + snap, nil
	}
	return req, "full " + snap, nil
}

// copyStream runs vc in this run, its progress the send step's.
func (r *volumeRun) copyStream(vc volumeCopy) (Copied, error) {
	vc.progress = func(text string) { r.progress(vc.to, text) }
	return vc.run(r.ctx, r.Entry)
}

// commonBase is the name of the newest snapshot of w that t holds too
// (equal GUIDs), else of w's newest bookmark whose snapshot t holds (a
// Mirror that missed runs the Writer has since pruned), or "". The send
// takes either name as its from_snapshot.
func commonBase(w, t rpc.Volume) string {
	held := func(g string) bool {
		return g != "" && slices.ContainsFunc(t.Snapshots, func(s rpc.VolumeSnapshot) bool { return s.GUID == g })
	}
	for i := len(w.Snapshots) - 1; i >= 0; i-- {
		if held(w.Snapshots[i].GUID) {
			return w.Snapshots[i].Name
		}
	}
	for i := len(w.Bookmarks) - 1; i >= 0; i-- {
		if held(w.Bookmarks[i].GUID) {
			return w.Bookmarks[i].Name
		}
	}
	return ""
}

// resumeAfter reads target's volume after a transfer failed: a resume
// token there means the stream was cut on the way and the next round
// sends only the rest. Anything else keeps the failure. After a cut
// (not a Machine's refusal) the target may still be ending its receive
// when the source's error arrives, so its token is waited for a while.
func (r *volumeRun) resumeAfter(target string, failed error) (*rpc.Volume, error) {
	wait := time.Duration(0)
	if cutLike(failed) {
		wait = r.waits.token
	}
	for deadline := time.Now().Add(wait); r.ctx.Err() == nil; {
		v, err := r.inspect(target)
		if err == nil && v.ResumeToken != "" {
			r.progress(target, fmt.Sprintf("%s: cut on the way (%v); continuing from %s's resume token", target, failed, target))
			return &v, nil
		}
		if !time.Now().Before(deadline) {
			break
		}
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil, failed
}

// cutLike reports whether err is a stream broken on the way rather than
// a Machine refusing it (a refusal leaves no token to wait for).
func cutLike(err error) bool {
	var re *rpc.Error
	if !errors.As(err, &re) {
		return true
	}
	return re.Code == rpc.CodeUnavailable || re.Code == rpc.CodeInternal
}
