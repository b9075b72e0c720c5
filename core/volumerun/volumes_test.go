package volumerun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volumecopy"
)

// TestLocateAndCreate: a volume is found on the one Machine holding it,
// refused as ambiguous on two or not found on none (naming who did not
// answer); a name a Machine holds is not created again.
func TestLocateAndCreate(t *testing.T) {
	fc := newFakeCluster(t, "m1", "m2", "m3")
	fc.volume("m2", "db", volumecopy.Copy{Role: volumecopy.Writer, Epoch: 1})
	fc.volume("m1", "logs", volumecopy.Copy{})
	fc.volume("m2", "logs", volumecopy.Copy{})
	ctx, rn := context.Background(), fc.runner()
	if m, err := rn.Locate(ctx, "db", ""); err != nil || m != "m2" {
		t.Fatalf("db: %q %v", m, err)
	}
	if m, err := rn.Locate(ctx, "db", "m9"); err != nil || m != "m9" {
		t.Fatalf("db --machine m9: %q %v", m, err)
	}
	var re *rpc.Error
	if _, err := rn.Locate(ctx, "logs", ""); !errors.As(err, &re) || re.Code != rpc.CodeAmbiguous || !strings.Contains(err.Error(), "m1, m2: pass --machine") {
		t.Fatalf("logs on two: %v", err)
	}
	fc.down("m3")
	if _, err := rn.Locate(ctx, "nosuch", ""); !errors.As(err, &re) || re.Code != rpc.CodeNotFound || !strings.Contains(err.Error(), "(no answer from m3") {
		t.Fatalf("nosuch: %v", err)
	}
	if _, err := rn.Create(ctx, "m1", "db", 1<<20); !errors.As(err, &re) || re.Code != rpc.CodeConflict || !strings.Contains(err.Error(), `a volume "db" already exists on m2`) {
		t.Fatalf("create db again: %v", err)
	}
	if _, ok := fc.ms["m1"].vols["db"]; ok {
		t.Fatal("a refused create made a volume")
	}
	// The list names the Machine that did not answer, as a partial result.
	ms, err := rn.List(ctx, rpc.Target{All: true})
	if u := Unanswered(ms); err != nil || !strings.Contains(u, "(no answer from m3") || len(ms) != 3 {
		t.Fatalf("volumes with m3 down: %d machines, %q, %v", len(ms), u, err)
	}
	if _, err := rn.List(ctx, rpc.Target{Set: []string{"m1"}}); err != nil {
		t.Fatalf("volumes on m1: %v", err)
	}
}
