package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCLILeaseHeld: a scale while another operator holds the namespace
// exits 4 naming the holder (with --json, one document carrying the
// error and the lease); with --wait it waits, saying for whom, and runs
// once the lease expires; lease ls lists a live lease.
func TestCLILeaseHeld(t *testing.T) {
	fc := cliCluster(t)
	fc.HoldLease("namespace:shop-production", "bo@ci", "deploy", time.Minute)
	out, errs, code := cli(t, fc, "scale", "web", "3", "-p", "shop", "-y", "--json")
	var doc struct {
		Error string
		Lease struct {
			Scope   string
			Holder  struct{ Name string }
			Command string
			Since   string
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitLeaseHeld || doc.Lease.Holder.Name != "bo@ci" ||
		doc.Lease.Command != "deploy" || doc.Lease.Since == "" || !strings.Contains(doc.Error, "bo@ci") {
		t.Fatalf("scale under bo's lease: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	if !strings.Contains(errs, "held by bo@ci") || !strings.Contains(errs, "--wait") || len(fc.Running()) != 2 {
		t.Fatalf("stderr %q, %d running", errs, len(fc.Running()))
	}
	out, _, code = cli(t, fc, "lease", "ls")
	if code != 0 || !strings.Contains(out, "namespace:shop-production") || !strings.Contains(out, "bo@ci") {
		t.Fatalf("lease ls: exit %d\n%s", code, out)
	}
	fc.HoldLease("namespace:shop-production", "bo@ci", "deploy", 300*time.Millisecond)
	_, errs, code = cli(t, fc, "scale", "web", "3", "-p", "shop", "-y", "--wait")
	if code != 0 || !strings.Contains(errs, "waiting: namespace:shop-production is held by bo@ci") || len(fc.Running()) != 3 {
		t.Fatalf("scale --wait: exit %d, %d running\n%s", code, len(fc.Running()), errs)
	}
}
