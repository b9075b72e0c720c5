package machine

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMissingIsUninitialized(t *testing.T) {
	r, err := Load(filepath.Join(t.TempDir(), "machine.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Phase != Uninitialized || len(r.ID) != 32 {
		t.Fatalf("fresh record = %+v", r)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "machine.json")
	want := Record{ID: NewID(), Name: "m1", Phase: Participating,
		Subnet: netip.MustParsePrefix("10.210.3.0/24"), Network: netip.MustParsePrefix("10.210.0.0/16"),
		Endpoints:      []netip.AddrPort{netip.MustParseAddrPort("192.0.2.1:51820")},
		TargetVersions: map[string]int64{"aa": 3}}
	if err := Save(p, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.ID || got.Subnet != want.Subnet || got.Phase != want.Phase || got.TargetVersions["aa"] != 3 {
		t.Fatalf("round trip: got %+v", got)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".machine.json.*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestFixtureTolerant pins the record format: a record written by a newer
// build, with fields this one does not know, still loads.
func TestFixtureTolerant(t *testing.T) {
	p := filepath.Join(t.TempDir(), "machine.json")
	fixture := `{"id":"0123456789abcdef0123456789abcdef","name":"m2","phase":"joining",
	  "subnet":"10.210.2.0/24","network":"10.210.0.0/16","endpoints":["10.0.0.2:51820"],
	  "join_peers":[{"id":"p1","public_key":"k","subnet":"10.210.0.0/24","endpoints":["10.0.0.1:51820"],"x":1}],"target_versions":{"s1":7},"from_the_future":{"x":1}}`
	if err := os.WriteFile(p, []byte(fixture), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Phase != Joining || r.Subnet.String() != "10.210.2.0/24" || r.TargetVersions["s1"] != 7 || r.JoinPeers[0].Endpoints[0].String() != "10.0.0.1:51820" {
		t.Fatalf("fixture = %+v", r)
	}
}

func TestLoadRefusesBadRecords(t *testing.T) {
	for name, body := range map[string]string{
		"phase": `{"id":"x","phase":"flying"}`,
		"id":    `{"phase":"joining"}`,
		"json":  `{"id":`,
	} {
		p := filepath.Join(t.TempDir(), "machine.json")
		os.WriteFile(p, []byte(body), 0o600)
		_, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), name) && name != "json" {
			t.Errorf("%s: error %v should name the field", name, err)
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
