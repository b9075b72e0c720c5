package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/internal/fakecluster"
)

// TestCLIHistoryJSON: history --json lists the deploy and the scale the
// CLI ran, newest first, naming the operator; --kind and -p filter; an
// unknown kind is refused naming the flag's field.
func TestCLIHistoryJSON(t *testing.T) {
	t.Setenv(operator.EnvOperator, "ci-job")
	fc := cliCluster(t)
	if _, errs, code := cli(t, fc, "scale", "web", "3", "-p", "shop", "-y"); code != 0 {
		t.Fatalf("scale: exit %d\n%s", code, errs)
	}
	list := func(args ...string) []string {
		t.Helper()
		out, errs, code := cli(t, fc, append([]string{"history", "--json"}, args...)...)
		var doc struct {
			Entries []struct {
				Kind, Namespace, Outcome string
				Revision                 int
				Operator                 struct{ Name string }
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.Entries == nil {
			t.Fatalf("history --json %v: exit %d, %v\n%s\n%s", args, code, err, out, errs)
		}
		var got []string
		for _, e := range doc.Entries {
			if e.Operator.Name != "ci-job" || e.Namespace != "shop-production" {
				t.Errorf("entry %+v", e)
			}
			got = append(got, e.Kind+"/"+e.Outcome+"/"+string(rune('0'+e.Revision)))
		}
		return got
	}
	if got := strings.Join(list(), " "); got != "scale/completed/2 deploy/completed/1" {
		t.Fatalf("history: %s", got)
	}
	if got := strings.Join(list("--kind", "deploy", "-p", "shop"), " "); got != "deploy/completed/1" {
		t.Fatalf("history --kind deploy: %s", got)
	}
	if got := list("-p", "blog"); len(got) != 0 {
		t.Fatalf("history of another project: %v", got)
	}
	out, _, code := cli(t, fc, "history")
	if code != 0 || !strings.Contains(out, "STARTED") || !strings.Contains(out, "scale web to 3 (from revision 1)") {
		t.Fatalf("history table: exit %d\n%s", code, out)
	}
	if _, errs, code := cli(t, fc, "history", "--kind", "deploys"); code == 0 || !strings.Contains(errs, `kind: "deploys"`) {
		t.Fatalf("unknown kind: exit %d\n%s", code, errs)
	}
}

// TestCtxOperator: ctx operator shows the default, sets a name for the
// context the command uses (not the others) and --reset goes back.
func TestCtxOperator(t *testing.T) {
	twoContexts(t).Close()
	t.Setenv(operator.EnvOperator, "")
	def := operator.DefaultOperatorName()
	run := func(args ...string) string {
		t.Helper()
		out, errs, code := cli(t, nil, append([]string{"ctx", "operator"}, args...)...)
		if code != 0 {
			t.Fatalf("ctx operator %v: exit %d\n%s", args, code, errs)
		}
		return strings.TrimSpace(out)
	}
	if got := run(); got != def {
		t.Fatalf("default %q, want %q", got, def)
	}
	if got := run("ana"); got != "ana" {
		t.Fatalf("set: %q", got)
	}
	if got := run(); got != "ana" {
		t.Fatalf("after set: %q", got)
	}
	if out, _, _ := cli(t, nil, "--context", "other", "ctx", "operator"); strings.TrimSpace(out) != def {
		t.Fatalf("other context: %q", out)
	}
	if got := run("--reset"); got != def {
		t.Fatalf("reset: %q", got)
	}
	if _, errs, code := cli(t, nil, "ctx", "operator", "a\x01b"); code == 0 || !strings.Contains(errs, "control characters") {
		t.Fatalf("control character: exit %d\n%s", code, errs)
	}
}

// TestCLIImportReportedOnce: the first command reaching the Cluster of a
// context imports this computer's older records and says so on stderr;
// the next command says nothing.
func TestCLIImportReportedOnce(t *testing.T) {
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	t.Setenv(operator.EnvContext, "")
	fc := fakecluster.New(t, "m1")
	st, err := operator.Open(operator.DefaultPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveContext(operator.Context{Name: "lab", Connections: []operator.Connection{{URL: fc.EntryURL()}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Use("lab"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveState("lab", "shop", "production", []byte("name: shop\nservices:\n  web:\n    image: app:1\n")); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, errs, code := cli(t, nil, "history", "--json")
	if code != 0 || !strings.Contains(errs, "imported this computer's records of context lab into the Cluster: 1 Saved State revision(s), 0 deploy record(s)") {
		t.Fatalf("first contact: exit %d\n%s", code, errs)
	}
	if _, errs, code := cli(t, nil, "history", "--json"); code != 0 || strings.Contains(errs, "imported") {
		t.Fatalf("second command: exit %d\n%s", code, errs)
	}
	if revs := fc.Revisions("shop-production"); len(revs) != 1 {
		t.Fatalf("Cluster revisions %+v", revs)
	}
}
