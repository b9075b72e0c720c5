package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/internal/fakecluster"
)

// cli runs the ployz command tree as main does, against fc through
// --connect (none for a nil fc), and returns stdout, stderr and the exit code.
func cli(t *testing.T, fc *fakecluster.Cluster, args ...string) (string, string, int) {
	t.Helper()
	root := &cobra.Command{Use: "ployz", SilenceUsage: true, SilenceErrors: true}
	addGlobalFlags(root)
	root.AddCommand(subcommands()...)
	var out, errw bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errw)
	if fc != nil {
		args = append([]string{"--connect", fc.EntryURL()}, args...)
	}
	root.SetArgs(args)
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		code = report(&errw, err)
	}
	return out.String(), errw.String(), code
}

// cliCluster is a fake Cluster of m1 and m2 with shop deployed by the CLI
// (2 web replicas), and an operator store of the test's own.
func cliCluster(t *testing.T) *fakecluster.Cluster {
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	t.Setenv("PLOYZ_AUTO_CONFIRM", "")
	fc := fakecluster.New(t, "m1", "m2")
	f := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(f, []byte("name: shop\nservices:\n  web:\n    image: app:1\n    deploy: {replicas: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cli(t, fc, "deploy", "-f", f, "-y", "--json")
	var doc struct {
		Plan    struct{ Namespace string }
		Outcome *struct{ Status string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.Plan.Namespace != "shop-production" || doc.Outcome == nil || doc.Outcome.Status != "completed" {
		t.Fatalf("deploy --json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	return fc
}

// TestCLIScaleAndDrain: scale prints its plan and outcome on stderr;
// machine drain --json prints one report document with each namespace's
// deploy result (from the library's typed result); undrain says so; a
// refused confirmation changes nothing.
func TestCLIScaleAndDrain(t *testing.T) {
	fc := cliCluster(t)
	_, errs, code := cli(t, fc, "scale", "web", "3", "-p", "shop", "-y")
	for _, want := range []string{"scale web to 3 (from revision 1)\nplan for shop-production", "outcome of shop-production revision 2: completed"} {
		if code != 0 || !strings.Contains(errs, want) {
			t.Fatalf("scale: exit %d, stderr lacks %q:\n%s", code, want, errs)
		}
	}
	if _, errs, code := cli(t, fc, "scale", "web", "1", "-p", "shop"); code != 1 || !strings.Contains(errs, "pass -y to confirm") || len(fc.Running()) != 3 {
		t.Fatalf("scale without -y and no terminal: exit %d, %d running\n%s", code, len(fc.Running()), errs)
	}
	out, errs, code := cli(t, fc, "machine", "drain", "m2", "-y", "--json")
	var rep struct {
		Machine    string
		Namespaces []struct {
			Namespace string
			Result    *struct{ Outcome *struct{ Status string } }
			Error     string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Machine != "m2" || len(rep.Namespaces) != 1 ||
		rep.Namespaces[0].Result == nil || rep.Namespaces[0].Result.Outcome == nil || rep.Namespaces[0].Result.Outcome.Status != "completed" {
		t.Fatalf("drain --json: exit %d, %v, %+v\n%s\n%s", code, err, rep, out, errs)
	}
	if got := strings.Join(fc.Running(), ","); got != "m1:web,m1:web,m1:web" {
		t.Fatalf("running %s after the drain", got)
	}
	if !strings.Contains(errs, "m2 is drained: no new Container is placed there") {
		t.Fatalf("drain stderr:\n%s", errs)
	}
	if _, errs, code := cli(t, fc, "machine", "undrain", "m2", "-y"); code != 0 || !strings.Contains(errs, "m2 takes new Containers again") {
		t.Fatalf("undrain: exit %d\n%s", code, errs)
	}
}

// TestCLIStopJSON: stop --json prints the plan, outcome and unobserved
// Machines as one document.
func TestCLIStopJSON(t *testing.T) {
	fc := cliCluster(t)
	out, errs, code := cli(t, fc, "stop", "web", "-p", "shop", "-y", "--json")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || len(doc) != 3 || doc["plan"] == nil || doc["outcome"] == nil {
		t.Fatalf("stop --json: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if got := fc.Running(); len(got) != 0 {
		t.Fatalf("running after stop: %v", got)
	}
}
