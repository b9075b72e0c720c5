package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// Without NAME, show and export pick the context every other command
// uses: PLOYZ_CONTEXT's over the current one, --context over both.
func TestCtxShowExportResolve(t *testing.T) {
	twoContexts(t).Close()
	ci, _ := json.Marshal(operator.Export{Version: operator.ExportVersion, Name: "ci", Connections: []operator.Connection{{URL: "unix:///run/ci.sock"}}})
	for _, tc := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"ctx", "show"}, "context home"},
		{string(ci), []string{"ctx", "show"}, "context ci"},
		{string(ci), []string{"ctx", "show", "other"}, "context other"},
		{string(ci), []string{"--context", "other", "ctx", "show"}, "context other"},
		{string(ci), []string{"ctx", "export"}, `"name": "ci"`},
		{"", []string{"ctx", "export"}, `"name": "home"`},
	} {
		t.Setenv(operator.EnvContext, tc.env)
		out, errs, code := cli(t, nil, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("PLOYZ_CONTEXT=%t %v: %q %q exit %d, want %q", tc.env != "", tc.args, out, errs, code, tc.want)
		}
	}
}

// deploy ls reads the records of the context the command uses: --context
// names another than the current one.
func TestDeployLsFollowsContext(t *testing.T) {
	st := twoContexts(t)
	now := time.Now()
	body, _ := json.Marshal(deploy.Record{DeploymentID: "d-other", Namespace: "hello-production", Status: deploy.RecordCompleted, StartedAt: now, UpdatedAt: now})
	if err := st.SaveDeploy(operator.DeployRow{Context: "other", DeploymentID: "d-other", Namespace: "hello-production", StartedAt: now, UpdatedAt: now, Body: body}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if out, errs, code := cli(t, nil, "--context", "other", "deploy", "ls", "--json"); code != 0 || !strings.Contains(out, `"d-other"`) {
		t.Fatalf("--context other deploy ls: %q %q exit %d", out, errs, code)
	}
	if out, _, code := cli(t, nil, "deploy", "ls", "--json"); code != 0 || strings.Contains(out, `"d-other"`) {
		t.Fatalf("the current context's deploy ls shows another context's record: %q exit %d", out, code)
	}
}

// twoContexts opens a fresh operator store (PLOYZ_OPERATOR_STORE) with
// contexts "home", the current one, and "other", and no PLOYZ_CONTEXT.
func twoContexts(t *testing.T) *operator.Store {
	t.Helper()
	t.Setenv(operator.EnvPath, filepath.Join(t.TempDir(), "operator.db"))
	t.Setenv(operator.EnvContext, "")
	st, err := operator.Open(operator.DefaultPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"home", "other"} {
		if err := st.SaveContext(operator.Context{Name: n, Connections: []operator.Connection{{URL: "unix:///run/" + n + ".sock"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Use("home"); err != nil {
		t.Fatal(err)
	}
	return st
}
