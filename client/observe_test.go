package client

import (
	"strings"
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if v, err := ParseWhen("since", "2h", now); err != nil || v != now.Add(-2*time.Hour).UnixNano() {
		t.Fatalf("2h = %v %v", v, err)
	}
	if v, err := ParseWhen("until", "2026-12-01T10:00:00Z", now); err != nil || v != now.Add(-2*time.Hour).UnixNano() {
		t.Fatalf("rfc3339 = %v %v", v, err)
	}
	if _, err := ParseWhen("since", "yesterday", now); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("bad value: %v", err)
	}
}
