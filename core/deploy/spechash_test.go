package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func TestSaltedSpecHash(t *testing.T) {
	s := svc("web", 1).Spec
	k1, k2 := make([]byte, 32), make([]byte, 32)
	k2[0] = 1
	h1, h2 := SaltedSpecHash(k1, s), SaltedSpecHash(k2, s)
	if !strings.HasPrefix(h1, "s1:") || len(h1) != len("s1:")+16 {
		t.Fatalf("salted hash %q: want s1: and 16 hex digits", h1)
	}
	if h1 == h2 {
		t.Fatal("two Clusters' keys give the same hash: the key does not salt it")
	}
	if h1 == "s1:"+SpecHash(s) {
		t.Fatal("the salted hash is the unsalted one with a prefix")
	}
	s2 := s
	s2.ServiceID, s2.DeploymentID = "other", "other"
	if SaltedSpecHash(k1, s2) != h1 {
		t.Fatal("per-deploy fields changed the salted hash")
	}
	s2.Env = map[string]string{"PASSWORD": "hunter2"}
	if SaltedSpecHash(k1, s2) == h1 {
		t.Fatal("a changed spec kept its salted hash")
	}
	if SaltedSpecHash(nil, s) != SpecHash(s) {
		t.Fatal("without a key the hash must be the unsalted one an older entry expects")
	}
}

// A Container an older version started carries the unsalted hash of the
// same spec: salting must not redeploy it, while a changed spec still
// replaces it, and everything the plan creates carries the salted hash.
func TestPlanSaltedKeepsUnsaltedContainers(t *testing.T) {
	key := make([]byte, 32)
	key[31] = 7
	web := svc("web", 2)
	spec := web.Spec
	spec.Namespace, spec.Service = ns, web.Name
	salted := SaltedSpecHash(key, spec)
	snap := snapOf(
		machine("m1", nil, ctr("web", hashOf(web), "running")),
		machine("m2", nil, ctr("web", salted, "running")),
		machine("m3", nil))
	snap.SpecKey = key
	p, err := MakePlan(app(web), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(p), lines("m1 web unchanged", "m2 web unchanged"); got != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", got, want)
	}

	changed := svc("web", 3, func(s *Service) { s.Spec.Env = map[string]string{"A": "b"} })
	p, err = MakePlan(app(changed), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var creates int
	for _, r := range p.Rows {
		if r.Op == OpUnchanged {
			t.Fatalf("a changed spec left %s unchanged", r.Machine)
		}
		if r.Spec != nil && !strings.HasPrefix(r.Spec.SpecHash, "s1:") {
			t.Fatalf("%s %s writes the unsalted hash %q", r.Machine, r.Op, r.Spec.SpecHash)
		}
		if r.Spec != nil {
			creates++
		}
	}
	if creates == 0 {
		t.Fatal("the changed spec created nothing")
	}
}

type keyCaller struct {
	key rpc.SpecHashKey
	err error
}

func (k keyCaller) Call(_ context.Context, _ rpc.Target, cmd string, _, out any) error {
	if cmd != rpc.CmdSpecHashKey {
		return errors.New("unexpected " + cmd)
	}
	if k.err != nil {
		return k.err
	}
	*out.(*rpc.SpecHashKey) = k.key
	return nil
}

func (keyCaller) Fanout(context.Context, rpc.Target, string, any) (rpc.FanoutResult, error) {
	return rpc.FanoutResult{}, errors.New("no fan-out")
}

func TestFetchSpecKey(t *testing.T) {
	ctx := context.Background()
	good := strings.Repeat("ab", 32)
	if k, err := FetchSpecKey(ctx, keyCaller{key: rpc.SpecHashKey{Key: good}}); err != nil || len(k) != 32 {
		t.Fatalf("good key: %x, %v", k, err)
	}
	old := rpc.Errorf(rpc.CodeUnsupported, "command %q is not served by this Machine", rpc.CmdSpecHashKey)
	if k, err := FetchSpecKey(ctx, keyCaller{err: old}); err != nil || k != nil {
		t.Fatalf("an entry without spec_hash_key: %x, %v; want no key and no error", k, err)
	}
	if _, err := FetchSpecKey(ctx, keyCaller{err: rpc.Errorf(rpc.CodeUnavailable, "down")}); err == nil {
		t.Fatal("an unavailable entry gave no error")
	}
	for _, bad := range []string{"zz", "abcd"} {
		if _, err := FetchSpecKey(ctx, keyCaller{key: rpc.SpecHashKey{Key: bad}}); err == nil || !strings.Contains(err.Error(), `field "key"`) {
			t.Fatalf("key %q: %v, want an error naming field \"key\"", bad, err)
		}
	}
}
