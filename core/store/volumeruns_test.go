package store

import (
	"testing"

	sdkstore "github.com/ployz/ployz/sdk/store"
)

// TestNextVolumeRun: the next gen is above every gen and the floor; an
// open run whose lease is live and its own refuses; every other open
// run (lease gone, expired, another's, or none) is lost.
func TestNextVolumeRun(t *testing.T) {
	const now = 1000
	run := func(gen uint64, state, nonce string) sdkstore.Row[VolumeRunBody] {
		return sdkstore.Row[VolumeRunBody]{Key: VolumeRunKey("db", gen), Body: VolumeRunBody{Volume: "db", Gen: gen, State: state, Lease: LeaseTag(nonce)}}
	}
	rows := []sdkstore.Row[VolumeRunBody]{run(3, "done", "a"), run(5, VolumeRunOpen, "b"), run(4, VolumeRunOpen, "")}
	lost, held, gen := NextVolumeRun(rows, &LeaseBody{Nonce: "b", Expires: now + 1}, 2, now)
	if held == nil || held.Body.Gen != 5 || len(lost) != 1 || lost[0].Body.Gen != 4 || gen != 6 {
		t.Fatalf("b's lease live: held %v, lost %v, gen %d", held, lost, gen)
	}
	lost, held, gen = NextVolumeRun(rows, &LeaseBody{Nonce: "b", Expires: now}, 9, now)
	if held != nil || len(lost) != 2 || gen != 10 {
		t.Fatalf("b's lease expired: held %v, lost %d, gen %d; want none held, 2 lost, gen 10", held, len(lost), gen)
	}
	if _, held, _ = NextVolumeRun(rows, &LeaseBody{Nonce: "c", Expires: now + 1}, 0, now); held != nil {
		t.Fatal("another's live lease held b's run")
	}
	if _, _, gen = NextVolumeRun(nil, nil, 0, now); gen != 1 {
		t.Fatalf("first gen %d", gen)
	}
	if LeaseTag("b") == "b" || LeaseTag("") != "" {
		t.Fatal("a lease tag must not be the nonce")
	}
}
