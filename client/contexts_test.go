package client

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/operator"
)

// openTwoContexts is an operator store of the test's own holding home
// (current) and other.
func openTwoContexts(t *testing.T, def string) *Contexts {
	t.Helper()
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	t.Setenv(operator.EnvContext, "")
	t.Setenv(operator.EnvOperator, "")
	cs, err := OpenContexts(def)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for _, n := range []string{"home", "other"} {
		if err := cs.st.SaveContext(operator.Context{Name: n, Connections: []operator.Connection{{URL: "unix:///run/" + n + ".sock"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Use("home"); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestContextRelease: a release setting is kept per context; a channel
// without a source is refused and nothing is saved; Clear goes first.
func TestContextRelease(t *testing.T) {
	cs := openTwoContexts(t, "")
	if _, err := cs.Release("", ReleaseUpdate{ReleaseSetting: operator.ReleaseSetting{Channel: "edge"}}); err == nil || !strings.Contains(err.Error(), "pass --release-source too") {
		t.Fatalf("channel alone: %v", err)
	}
	if r, err := cs.Release("", ReleaseUpdate{}); err != nil || r.Context != "home" || r.Source != "" || r.Channel != "" {
		t.Fatalf("refused one saved: %+v %v", r, err)
	}
	r, err := cs.Release("", ReleaseUpdate{ReleaseSetting: operator.ReleaseSetting{Source: "/r", Channel: "edge"}})
	if err != nil || r.Source != "/r" || r.Channel != "edge" {
		t.Fatalf("set: %+v %v", r, err)
	}
	if r, _ := cs.Release("other", ReleaseUpdate{}); r.Context != "other" || r.Source != "" {
		t.Fatalf("other shares it: %+v", r)
	}
	if r, err := cs.Release("", ReleaseUpdate{Clear: true, ReleaseSetting: operator.ReleaseSetting{Source: "/s"}}); err != nil || r.Source != "/s" || r.Channel != "" {
		t.Fatalf("clear then source: %+v %v", r, err)
	}
}

// TestContextOperatorName: set, reset and the environment's override,
// which is named only when a name was just changed.
func TestContextOperatorName(t *testing.T) {
	cs := openTwoContexts(t, "other")
	name := "ana@laptop"
	if _, err := cs.OperatorName(&name, true); err == nil || !strings.Contains(err.Error(), "--reset: takes no NAME") {
		t.Fatalf("reset with a name: %v", err)
	}
	if o, err := cs.OperatorName(&name, false); err != nil || o.Context != "other" || o.Name != name || o.Overridden != "" {
		t.Fatalf("set: %+v %v", o, err)
	}
	t.Setenv(operator.EnvOperator, "ci@runner")
	if o, _ := cs.OperatorName(nil, false); o.Overridden != "" {
		t.Fatalf("a show names the override: %+v", o)
	}
	if o, err := cs.OperatorName(nil, true); err != nil || o.Name == name || o.Overridden != "ci@runner" {
		t.Fatalf("reset: %+v %v", o, err)
	}
}

// TestContextDeploysLimit: a limit below 1 is refused naming the flag;
// no records list as empty, not null.
func TestContextDeploysLimit(t *testing.T) {
	cs := openTwoContexts(t, "")
	if _, err := cs.Deploys(0); err == nil || err.Error() != "--limit: must be at least 1, got 0" {
		t.Fatalf("limit 0: %v", err)
	}
	if l, err := cs.Deploys(5); err != nil || l.Deploys == nil || len(l.Deploys) != 0 {
		t.Fatalf("none: %+v %v", l, err)
	}
}
