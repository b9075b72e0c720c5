package e2e

import "testing"

// TestParseIdleSample reads the idle benchmark's per-process lines: the
// clock tick rate first, then unit, pid, CPU ticks and PSS in KiB.
func TestParseIdleSample(t *testing.T) {
	s, err := parseIdleSample("100\nployz.service 42 350 20480\nployz-plugin@dns.service 43 12 8192\n")
	if err != nil {
		t.Fatal(err)
	}
	if s.hz != 100 || len(s.procs) != 2 {
		t.Fatalf("sample = %+v", s)
	}
	if p := s.procs[43]; p.unit != "ployz-plugin@dns" || p.ticks != 12 || p.pssKiB != 8192 {
		t.Fatalf("dns process = %+v", p)
	}
	if _, err := parseIdleSample("100\nployz.service x"); err == nil {
		t.Fatal("a malformed line parsed")
	}
}
