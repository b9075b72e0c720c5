package render

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/core/footprint"
)

func TestHostOutcome(t *testing.T) {
	var b strings.Builder
	o := client.HostOutcome{Host: "ssh://root@h", Machine: "m3", Cluster: client.ClusterLeft, Removed: 1, Failed: 1, Items: []footprint.Result{
		{Kind: footprint.KindLink, Name: "ployz-wg", State: footprint.Failed, Found: []string{"ployz-wg"}, Error: "still present: ployz-wg"},
		{Kind: footprint.KindPath, Name: "/etc/ployz", State: footprint.Removed, Found: []string{"/etc/ployz"}},
		{Kind: footprint.KindPath, Name: "/run/ployz", State: footprint.Absent},
	}}
	if err := HostOutcome(&b, o); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"machine m3: cluster left", "failed   link", "still present: ployz-wg", "removed  path", "1 removed, 0 kept, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "/run/ployz") {
		t.Errorf("absent items listed:\n%s", out)
	}
	b.Reset()
	none := client.HostOutcome{Host: "ssh://root@h", Cluster: client.ClusterNotMember, Items: []footprint.Result{{Name: "/etc/ployz", State: footprint.Absent}}}
	if err := HostOutcome(&b, none); err != nil || !strings.Contains(b.String(), "nothing to remove on ssh://root@h") {
		t.Errorf("clean host: %q, %v", b.String(), err)
	}
}
