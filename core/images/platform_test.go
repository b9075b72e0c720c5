package images

import (
	"strings"
	"testing"
)

func TestOnePlatform(t *testing.T) {
	if p, err := onePlatform(nil); p != "" || err != nil {
		t.Errorf("no reports: %q %v, want none", p, err)
	}
	if p, err := onePlatform(map[string][]string{"linux/arm64": {"m2", "m1"}}); p != "linux/arm64" || err != nil {
		t.Errorf("one platform: %q %v", p, err)
	}
	_, err := onePlatform(map[string][]string{"linux/arm64": {"m3"}, "linux/amd64": {"m2", "m1"}})
	if err == nil || !strings.Contains(err.Error(), "linux/amd64 (m1, m2), linux/arm64 (m3)") {
		t.Errorf("two platforms: %v, want both named with their Machines", err)
	}
}

func TestSamePlatform(t *testing.T) {
	for _, c := range []struct {
		machine, image string
		want           bool
	}{
		{"linux/amd64", "linux/amd64", true},
		{"linux/arm", "linux/arm/v7", true},
		{"linux/amd64", "linux/arm64", false},
		{"linux/arm64", "linux/arm64/v8", true},
		{"linux/arm", "linux/arm64", false},
	} {
		if got := samePlatform(c.machine, c.image); got != c.want {
			t.Errorf("samePlatform(%q, %q) = %v", c.machine, c.image, got)
		}
	}
}
