package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// saltingEntry stands in for the entry Machine: it salts digests with
// key as the daemon's salt_spec_hashes does (rpc.SaltSpecDigest), or
// fails with err.
type saltingEntry struct {
	key    []byte
	err    error
	calls  int
	mangle func(*rpc.SaltSpecHashesResult)
}

func (e *saltingEntry) Call(_ context.Context, _ rpc.Target, cmd string, payload, out any) error {
	if cmd != rpc.CmdSaltSpecHashes {
		return errors.New("unexpected " + cmd)
	}
	e.calls++
	if e.err != nil {
		return e.err
	}
	req := payload.(rpc.SaltSpecHashesRequest)
	if err := req.Validate(); err != nil {
		return err
	}
	res := out.(*rpc.SaltSpecHashesResult)
	for _, d := range req.Digests {
		res.Hashes = append(res.Hashes, rpc.SaltSpecDigest(e.key, d))
	}
	if e.mangle != nil {
		e.mangle(res)
	}
	return nil
}

func (*saltingEntry) Fanout(context.Context, rpc.Target, string, any) (rpc.FanoutResult, error) {
	return rpc.FanoutResult{}, errors.New("no fan-out")
}

func key(b byte) []byte {
	k := make([]byte, 32)
	k[31] = b
	return k
}

func salts(t *testing.T, k []byte, a App) SpecSalts {
	t.Helper()
	ss, err := SaltSpecs(context.Background(), &saltingEntry{key: k}, a)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// The salted hash is not the plain SHA-256 of the spec in any form, is
// the same for the same Cluster secret and differs between Clusters.
func TestSaltedSpecHash(t *testing.T) {
	web := svc("web", 1)
	spec := serviceSpec(ns, web)
	h1 := salts(t, key(1), app(web))[SpecDigest(spec)]
	if !strings.HasPrefix(h1, "s1:") || len(h1) != len("s1:")+16 {
		t.Fatalf("salted hash %q: want s1: and 16 hex digits", h1)
	}
	sum := sha256.Sum256(specBytes(spec))
	plain := hex.EncodeToString(sum[:])
	if strings.Contains(plain, h1[3:]) || h1[3:] == SpecHash(spec) {
		t.Fatalf("salted hash %q is (part of) the plain sha256 %s", h1, plain)
	}
	if again := salts(t, key(1), app(web))[SpecDigest(spec)]; again != h1 {
		t.Fatalf("same secret, same spec: %q then %q", h1, again)
	}
	if other := salts(t, key(2), app(web))[SpecDigest(spec)]; other == h1 {
		t.Fatal("two Clusters' secrets give the same hash: the key does not salt it")
	}
	changed := svc("web", 1, func(s *Service) { s.Spec.Env = map[string]string{"PASSWORD": "hunter2"} })
	if h := salts(t, key(1), app(changed))[SpecDigest(serviceSpec(ns, changed))]; h == h1 || h == "" {
		t.Fatalf("a changed spec: %q (was %q)", h, h1)
	}
	s2 := spec
	s2.ServiceID, s2.DeploymentID, s2.SpecHash = "other", "other", "x"
	if SpecDigest(s2) != SpecDigest(spec) {
		t.Fatal("per-deploy fields changed the digest")
	}
}

// A Container an older version started carries the unsalted hash of the
// same spec: salting must not redeploy it, while a changed spec still
// replaces it; everything the plan creates, hooks included, carries the
// salted hash and never the unsalted one.
func TestPlanSaltedKeepsUnsaltedContainers(t *testing.T) {
	web := svc("web", 2, func(s *Service) {
		s.Hooks = []Hook{{Command: []string{"/app", "migrate"}, Environment: map[string]string{"X": "1"}}}
	})
	snap := snapOf(
		machine("m1", nil, ctr("web", hashOf(web), "running")),
		machine("m2", nil, ctr("web", salts(t, key(7), app(web))[SpecDigest(serviceSpec(ns, web))], "running")),
		machine("m3", nil))
	snap.Salts = salts(t, key(7), app(web))
	p, err := MakePlan(app(web), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(p), lines("m1 web unchanged", "m2 web unchanged"); got != want {
		t.Fatalf("plan:\n%s\nwant:\n%s", got, want)
	}

	changed := svc("web", 3, func(s *Service) {
		s.Spec.Env = map[string]string{"A": "b"}
		s.Hooks = web.Hooks
	})
	snap.Salts = salts(t, key(7), app(changed))
	p, err = MakePlan(app(changed), snap, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var specs, hooks int
	for _, r := range p.Rows {
		if r.Op == OpUnchanged {
			t.Fatalf("a changed spec left %s unchanged", r.Machine)
		}
		if r.Spec == nil {
			continue
		}
		specs++
		if r.Op == OpHook {
			hooks++
		}
		if !strings.HasPrefix(r.Spec.SpecHash, "s1:") || r.Spec.SpecHash[3:] == SpecHash(*r.Spec) {
			t.Fatalf("%s %s writes the unsalted hash %q", r.Machine, r.Op, r.Spec.SpecHash)
		}
	}
	if specs == 0 || hooks != 1 {
		t.Fatalf("the changed spec wrote %d specs, %d hooks; want some and one hook", specs, hooks)
	}

	// Salts that lack a spec are refused, never written unsalted.
	snap.Salts = SpecSalts{"0": "s1:0000000000000000"}
	if _, err := MakePlan(app(changed), snap, PlanOptions{}); err == nil || !strings.Contains(err.Error(), "not salted") {
		t.Fatalf("salts without the spec: %v", err)
	}
}

// One call per Deploy; an entry without the capability is refused naming
// it; a malformed answer is refused naming the field.
func TestSaltSpecs(t *testing.T) {
	ctx := context.Background()
	web := svc("web", 1, func(s *Service) { s.Hooks = []Hook{{Command: []string{"/app", "migrate"}}} })
	e := &saltingEntry{key: key(3)}
	ss, err := SaltSpecs(ctx, e, app(web, svc("api", 1)))
	if err != nil || e.calls != 1 || len(ss) != 3 {
		t.Fatalf("salts %v, %d calls, %v; want 3 in one call", ss, e.calls, err)
	}
	old := rpc.Errorf(rpc.CodeUnsupported, "command %q is not served by this Machine", rpc.CmdSaltSpecHashes)
	_, err = SaltSpecs(ctx, &saltingEntry{err: old}, app(web))
	if !errors.Is(err, ErrUnsaltedEntry) || !strings.Contains(err.Error(), rpc.CapSaltSpecHashes) {
		t.Fatalf("an entry without salt_spec_hashes: %v; want a refusal naming %s", err, rpc.CapSaltSpecHashes)
	}
	if _, err := SaltSpecs(ctx, &saltingEntry{err: rpc.Errorf(rpc.CodeUnavailable, "down")}, app(web)); err == nil {
		t.Fatal("an unavailable entry gave no error")
	}
	short := &saltingEntry{key: key(3), mangle: func(r *rpc.SaltSpecHashesResult) { r.Hashes = r.Hashes[1:] }}
	if _, err := SaltSpecs(ctx, short, app(web)); err == nil || !strings.Contains(err.Error(), `field "hashes"`) {
		t.Fatalf("too few hashes: %v", err)
	}
	plain := &saltingEntry{key: key(3), mangle: func(r *rpc.SaltSpecHashesResult) { r.Hashes[0] = SpecHash(web.Spec) }}
	if _, err := SaltSpecs(ctx, plain, app(web)); err == nil || !strings.Contains(err.Error(), `field "hashes[0]"`) {
		t.Fatalf("an unsalted hash in the answer: %v", err)
	}
}
