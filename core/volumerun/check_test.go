package volumerun

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func TestCheckCreate(t *testing.T) {
	if n, err := CheckCreate("data", "m1", "1GiB"); err != nil || n != 1<<30 {
		t.Fatalf("CheckCreate = %d, %v", n, err)
	}
	for _, tc := range []struct{ name, machine, size, want string }{
		{"a/b", "m1", "1GiB", "NAME"}, {"data", "", "1GiB", "--machine"}, {"data", "m1", "lots", "--size"},
	} {
		if _, err := CheckCreate(tc.name, tc.machine, tc.size); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("CheckCreate(%q, %q, %q) = %v, want an error naming %s", tc.name, tc.machine, tc.size, err, tc.want)
		}
	}
}

func TestCheckSetCopy(t *testing.T) {
	ok := rpc.SetVolumeCopyRequest{Volume: "data", Gen: 2, Expect: "none", Want: "mirror"}
	if err := CheckSetCopy("m1", ok); err != nil {
		t.Fatal(err)
	}
	bad := func(f func(*rpc.SetVolumeCopyRequest)) rpc.SetVolumeCopyRequest { r := ok; f(&r); return r }
	for want, req := range map[string]rpc.SetVolumeCopyRequest{
		"NAME":     bad(func(r *rpc.SetVolumeCopyRequest) { r.Volume = "a/b" }),
		"--expect": bad(func(r *rpc.SetVolumeCopyRequest) { r.Expect = "owner" }),
		"--want":   bad(func(r *rpc.SetVolumeCopyRequest) { r.Want = "" }),
		"--gen":    bad(func(r *rpc.SetVolumeCopyRequest) { r.Gen = 0 }),
	} {
		if err := CheckSetCopy("m1", req); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %s", req, err, want)
		}
	}
	if err := CheckSetCopy("", ok); err == nil || !strings.HasPrefix(err.Error(), "--machine") {
		t.Errorf("no machine: %v", err)
	}
}

// TestCheckSend: a send needs a valid --snapshot and, when given, --from;
// a resume token needs neither.
func TestCheckSend(t *testing.T) {
	if err := CheckSend(rpc.SendVolumeRequest{Volume: "db", Snapshot: "s2", FromSnapshot: "s1"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckSend(rpc.SendVolumeRequest{Volume: "db", ResumeToken: "1-abc"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	for want, req := range map[string]rpc.SendVolumeRequest{
		"--snapshot": {Volume: "db"},
		"--from":     {Volume: "db", Snapshot: "s2", FromSnapshot: "a/b"},
	} {
		if err := CheckSend(req); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%+v: %v, want an error naming %s", req, err, want)
		}
	}
}
