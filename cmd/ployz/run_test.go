package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/internal/fakecluster"
)

// cliIn is cli with stdin given.
func cliIn(t *testing.T, fc *fakecluster.Cluster, stdin string, args ...string) (string, string, int) {
	t.Helper()
	root := &cobra.Command{Use: "ployz", SilenceUsage: true, SilenceErrors: true}
	addGlobalFlags(root)
	root.AddCommand(subcommands()...)
	var out, errw bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(append([]string{"--connect", fc.EntryURL()}, args...))
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		code = report(&errw, err)
	}
	return out.String(), errw.String(), code
}

// TestCLIRun: ployz run exits with the command's code, its output on
// stdout and stdin passed; --detach --json prints the Container and the
// logs command; refusals name what is wrong.
func TestCLIRun(t *testing.T) {
	fc := cliCluster(t)
	out, errs, code := cliIn(t, fc, "", "run", "web", "-p", "shop", "--", "/app", "exit", "3")
	if code != 3 || out != "/app exit 3\n" || !strings.HasPrefix(errs, "in shop-production-web-run-") {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if out, _, code := cliIn(t, fc, "typed\n", "run", "web", "-p", "shop", "--", "cat"); code != 0 || out != "cat\ntyped\n" {
		t.Fatalf("run cat: exit %d, stdout %q", code, out)
	}

	out, errs, code = cliIn(t, fc, "", "run", "web", "-p", "shop", "--env", "production", "--detach", "--keep", "--machine", "m2", "--json", "--", "/app", "report")
	var doc struct {
		Container, ID, Machine, Logs string
		Detached, Kept               bool
		ExitCode                     *int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || doc.Machine != "m2" || !doc.Detached || !doc.Kept || doc.ExitCode != nil || doc.ID == "" ||
		doc.Logs != "ployz logs web -p shop --container "+doc.Container+" -f" {
		t.Fatalf("--detach --json: exit %d, %v, %+v\n%s\n%s", code, err, doc, out, errs)
	}
	out, _, code = cliIn(t, fc, "", "ps", "-p", "shop")
	if code != 0 || !strings.Contains(out, "web (run)") || strings.Count(out, "web (run)") != 1 {
		t.Fatalf("ps lists the kept run: exit %d\n%s", code, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "web", "-p", "shop", "--json"}, "--json: only with --detach"},
		{[]string{"run", "api", "-p", "shop"}, "service api: not deployed in shop-production"},
		{[]string{"run", "web", "-p", "shop", "--machine", "m7"}, "--machine"},
	} {
		if _, errs, code := cliIn(t, fc, "", c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}
