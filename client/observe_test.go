package client

import (
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
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

// TestLogWindowRequest: without --since the newest 100 lines; --tail
// asks for the newest N; with --since all of them; --until before
// --since and a --tail over the limit are refused.
func TestLogWindowRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	q := rpc.LogQuery{Namespace: "shop-production", Service: "web"}
	if r, err := (LogWindow{Tail: -1}).Request(q, now); err != nil || r.Limit != 100 || !r.Newest || r.Since != 0 || r.Service != "web" {
		t.Fatalf("default: %+v %v", r, err)
	}
	if r, err := (LogWindow{Tail: 5}).Request(q, now); err != nil || r.Limit != 5 || !r.Newest {
		t.Fatalf("tail 5: %+v %v", r, err)
	}
	r, err := (LogWindow{Since: "2h", Until: "1h", Tail: -1}).Request(q, now)
	if err != nil || r.Limit != rpc.MaxLogLimit || r.Newest || r.Since != now.Add(-2*time.Hour).UnixNano() || r.Until != now.Add(-time.Hour).UnixNano() {
		t.Fatalf("since 2h until 1h: %+v %v", r, err)
	}
	if _, err := (LogWindow{Since: "1h", Until: "2h"}).Request(q, now); err == nil || !strings.Contains(err.Error(), "--until is before --since") {
		t.Fatalf("until before since: %v", err)
	}
	if _, err := (LogWindow{Tail: rpc.MaxLogLimit + 1}).Request(q, now); err == nil || !strings.Contains(err.Error(), "--tail") {
		t.Fatalf("tail over the limit: %v", err)
	}
}

// TestMetricsRequest: a Service's query names its namespace; each
// Machine's own asks for Machine metrics; past 24 hours the 5-minute
// Rollups are read; a bad --since is refused.
func TestMetricsRequest(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r, err := MetricsRequest("shop-production", "web", []string{"cpu.cores"}, "1h", now)
	if err != nil || r.Machine || r.Namespace != "shop-production" || r.Service != "web" || r.StepSeconds != 0 || r.Since != now.Add(-time.Hour).UnixNano() || r.Metrics[0] != "cpu.cores" {
		t.Fatalf("service 1h: %+v %v", r, err)
	}
	if r, err := MetricsRequest("", "", nil, "48h", now); err != nil || !r.Machine || r.StepSeconds != 300 {
		t.Fatalf("machine 48h: %+v %v", r, err)
	}
	if _, err := MetricsRequest("", "", nil, "-1h", now); err == nil || !strings.Contains(err.Error(), "--since") {
		t.Fatalf("negative since: %v", err)
	}
}
