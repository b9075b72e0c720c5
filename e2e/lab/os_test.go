package lab

import (
	"strings"
	"testing"
)

func TestParseOS(t *testing.T) {
	for in, want := range map[string]OS{"debian13": Debian13, "debian12": Debian12} {
		got, err := ParseOS(in)
		if err != nil || got != want {
			t.Errorf("ParseOS(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "debian11", "trixie", "ubuntu24.04"} {
		_, err := ParseOS(in)
		if err == nil || !strings.Contains(err.Error(), "debian13, debian12") {
			t.Errorf("ParseOS(%q): error %v does not list the choices", in, err)
		}
	}
}

func TestOptionsDefaultOS(t *testing.T) {
	o := Options{BinDir: "bin"}
	if err := o.defaults(); err != nil || o.OS != Debian13 {
		t.Fatalf("default OS = %q, %v; want debian13", o.OS, err)
	}
	o = Options{BinDir: "bin", OS: "debian9"}
	if err := o.defaults(); err == nil || !strings.Contains(err.Error(), `os "debian9"`) {
		t.Fatalf("unknown OS accepted or unnamed: %v", err)
	}
}
