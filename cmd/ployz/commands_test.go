package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
)

// TestReportExitCodes: a partial result exits 3, a silent one prints
// nothing (its command already told the user), anything else exits 1
// with the error on one line.
func TestReportExitCodes(t *testing.T) {
	var b bytes.Buffer
	if code := report(&b, fmt.Errorf("deploy: %w", &exitError{code: 3, err: errors.New("2 of 5 rows failed")})); code != 3 || b.String() != "ployz: deploy: 2 of 5 rows failed\n" {
		t.Fatalf("partial: code %d, printed %q", code, b.String())
	}
	b.Reset()
	if code := report(&b, &exitError{code: 3, silent: true, err: errors.New("x")}); code != 3 || b.Len() != 0 {
		t.Fatalf("silent: code %d, printed %q", code, b.String())
	}
	b.Reset()
	if code := report(&b, errors.New("no context")); code != 1 || b.String() != "ployz: no context\n" {
		t.Fatalf("plain: code %d, printed %q", code, b.String())
	}
}

// TestConnectTimeoutFromEnv: PLOYZ_CONNECT_TIMEOUT stands for
// --connect-timeout unless the flag is given; a malformed value is an
// error naming the variable.
func TestConnectTimeoutFromEnv(t *testing.T) {
	newRoot := func() *cobra.Command {
		root := &cobra.Command{Use: "ployz", RunE: func(*cobra.Command, []string) error { return nil }}
		addGlobalFlags(root)
		return root
	}
	t.Setenv("PLOYZ_CONNECT_TIMEOUT", "90s")
	root := newRoot()
	if err := root.ParseFlags(nil); err != nil || envDefaults(root) != nil || g.connectTimeout != 90*time.Second {
		t.Fatalf("env 90s: %v, timeout %s", err, g.connectTimeout)
	}
	root = newRoot()
	if err := root.ParseFlags([]string{"--connect-timeout", "5s"}); err != nil || envDefaults(root) != nil || g.connectTimeout != 5*time.Second {
		t.Fatalf("flag over env: %v, timeout %s", err, g.connectTimeout)
	}
	t.Setenv("PLOYZ_CONNECT_TIMEOUT", "soon")
	root = newRoot()
	_ = root.ParseFlags(nil)
	if err := envDefaults(root); err == nil || !strings.Contains(err.Error(), "PLOYZ_CONNECT_TIMEOUT") {
		t.Fatalf("malformed env: %v", err)
	}
	if g.dialOptions().AnswerTimeout != operator.DefaultAnswerTimeout {
		t.Fatalf("dial options after a refused env: %s", g.dialOptions().AnswerTimeout)
	}
}
