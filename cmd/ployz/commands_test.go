package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
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
