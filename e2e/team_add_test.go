package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	opstore "github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
)

// legacyCompose is the project B deployed from her computer before the
// Cluster kept operator state.
const legacyCompose = "name: legacy\nservices:\n  web:\n    image: " + lab.TestAppImage + "\n"

// secondOperator is operator B on TestCluster's lab: her own operator
// store (and known_hosts beside it) and operator name, the lab's key.
// Her store is one a release before the Cluster kept operator state left
// behind: A's context, and a revision of project legacy with the record
// of its completed deploy, never imported.
func secondOperator(t *testing.T, l *lab.Lab, a *operator) *operator {
	t.Helper()
	dir := t.TempDir()
	b := &operator{store: filepath.Join(dir, "operator.db"), key: a.key, env: []string{"PLOYZ_OPERATOR=bob"},
		pins: &labPins{lab: l, hk: rpc.HostKeys{Path: filepath.Join(dir, "known_hosts")}}}
	stA, err := opstore.Open(a.store)
	if err != nil {
		t.Fatal(err)
	}
	c, err := stA.Context("default")
	stA.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := opstore.Open(b.store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SaveContext(c); err != nil {
		t.Fatal(err)
	}
	if err := st.Use(c.Name); err != nil {
		t.Fatal(err)
	}
	saved, err := st.SaveState(c.Name, "legacy", "production", []byte(legacyCompose))
	if err != nil {
		t.Fatal(err)
	}
	at, id := time.Now().Add(-time.Hour), deploy.NewID(6)
	body, _ := json.Marshal(deploy.Record{DeploymentID: id, Namespace: "legacy-production", Project: "legacy",
		Environment: "production", Revision: saved.Revision, Why: "deploy from an older release", Status: deploy.RecordCompleted,
		StartedAt: at, UpdatedAt: at.Add(time.Minute), FinishedAt: at.Add(time.Minute)})
	if err := st.SaveDeploy(opstore.DeployRow{Context: c.Name, DeploymentID: id, Namespace: "legacy-production",
		StartedAt: at, UpdatedAt: at.Add(time.Minute), Body: body}); err != nil {
		t.Fatal(err)
	}
	return b
}

// legacyHistory is o's `ployz history -p legacy`: its entries and the
// CLI's stderr.
func legacyHistory(t *testing.T, o *operator) ([]rpc.HistoryEntry, string) {
	t.Helper()
	out, errs, code := o.run(t, "history", "-p", "legacy", "--json")
	var doc struct {
		Entries []rpc.HistoryEntry `json:"entries"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("history -p legacy: exit %d\n%s%s", code, out, errs)
	}
	return doc.Entries, errs
}

// importOnFirstContact: B's first command against the Cluster imports
// her older store once, saying what it moved; the revision's deploy is
// in the Cluster's history for her and for A; her next command imports
// nothing.
func importOnFirstContact(t *testing.T, a, b *operator) {
	t.Helper()
	seen, errs := legacyHistory(t, b)
	if !strings.Contains(errs, "imported this computer's records of context default into the Cluster: 1 Saved State revision(s), 1 deploy record(s)") {
		t.Fatalf("bob's first command did not say what it imported:\n%s", errs)
	}
	fromA, _ := legacyHistory(t, a)
	for who, h := range map[string][]rpc.HistoryEntry{"bob": seen, "alice": fromA} {
		if len(h) != 1 || h[0].Kind != rpc.HistoryDeploy || h[0].Revision != 1 || h[0].Outcome != rpc.OutcomeCompleted ||
			h[0].Operator.Name != "bob" || !strings.Contains(h[0].Detail, "deploy from an older release") {
			t.Fatalf("%s's history of legacy: %+v; want bob's imported deploy of revision 1, completed", who, h)
		}
	}
	again, errs := legacyHistory(t, b)
	if strings.Contains(errs, "imported") || len(again) != 1 || again[0].ID != seen[0].ID {
		t.Fatalf("bob's second command: history %+v, stderr %q; want nothing imported again", again, errs)
	}
}

// concurrentAdds: with m3 removed, A removes m2 too (reset); then A adds
// m2 and B adds m3 at the same moment. Enrollment holds the Cluster's
// enroll lease, so with --wait exactly one of them waits for the other;
// both join, and every Machine sees three participating Machines with
// distinct subnets.
func concurrentAdds(ctx context.Context, t *testing.T, l *lab.Lab, a, b *operator, m2 string) {
	t.Helper()
	a.must(t, "machine", "rm", m2, "-y")
	eventually(t, 60*time.Second, "m2 reset", func() error {
		in, err := inspectLocal(ctx, l, "m2")
		if err == nil && in.Phase != "uninitialized" {
			err = fmt.Errorf("m2 is %s", in.Phase)
		}
		return err
	})
	start := time.Now()
	add := func(o *operator, name string) *streamed {
		m, err := l.Machine(name)
		if err != nil {
			t.Fatal(err)
		}
		return o.stream(ctx, t, "--wait", "machine", "add", "root@"+m.IP.String(), "--name", name)
	}
	alice := *a
	alice.env = append(append([]string{}, a.env...), "PLOYZ_OPERATOR=alice")
	adds := map[string]*streamed{"alice": add(&alice, "m2"), "bob": add(b, "m3")}
	other := map[string]string{"alice": "bob", "bob": "alice"}
	waited := 0
	for who, s := range adds {
		out, errs, code := s.wait()
		if code != 0 {
			t.Fatalf("%s's machine add: exit %d\n%s%s", who, code, out, errs)
		}
		// Enrollment's own progress also says "waiting for ...".
		if line, ok := lineWith(errs, "waiting: enroll is held by"); ok {
			waited++
			if !strings.Contains(line, other[who]) {
				t.Errorf("%s waited for the enroll lease without naming %s: %s", who, other[who], line)
			}
			t.Logf("%s %s", who, line)
		}
	}
	t.Logf("two concurrent machine adds took %s", time.Since(start).Round(100*time.Millisecond))
	if waited != 1 {
		t.Errorf("%d of the two concurrent adds waited for the enroll lease; want exactly one", waited)
	}
	for _, m := range l.Machines {
		eventually(t, 60*time.Second, m.Name+" sees three Machines, distinct subnets", func() error {
			list, err := lsFrom(ctx, l, m.Name)
			if err != nil {
				return err
			}
			subnets := map[string]string{}
			for _, v := range list.Machines {
				if v.Phase != "participating" || (v.Membership != "self" && v.Membership != "up") {
					return fmt.Errorf("%s is %s, %s", v.Name, v.Phase, v.Membership)
				}
				if other, ok := subnets[v.Subnet]; ok || v.Subnet == "" {
					return fmt.Errorf("%s and %s share subnet %q", v.Name, other, v.Subnet)
				}
				subnets[v.Subnet] = v.Name
			}
			if len(list.Machines) != 3 {
				return fmt.Errorf("%d Machines", len(list.Machines))
			}
			return nil
		})
	}
}

// lineWith is text's first line holding marker.
func lineWith(text, marker string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, marker) {
			return l, true
		}
	}
	return "", false
}
