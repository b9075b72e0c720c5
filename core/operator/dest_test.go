package operator

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func TestNormalizeDest(t *testing.T) {
	for in, want := range map[string]string{
		"local":                  "unix://" + rpc.DefaultSocket,
		"10.0.0.5":               "ssh://root@10.0.0.5",
		"m1.example":             "ssh://root@m1.example",
		"admin@m1.example":       "ssh://admin@m1.example",
		"ssh://ops@m1:2222":      "ssh://ops@m1:2222",
		"unix:///tmp/ployz.sock": "unix:///tmp/ployz.sock",
		"[fd00::1]":              "ssh://root@[fd00::1]",
	} {
		if got := NormalizeDest(in); got != want {
			t.Errorf("NormalizeDest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"zone=a", "gpu=", "role=db=primary", "zone=b"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"zone": "b", "gpu": "", "role": "db=primary"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	if got, err := ParseLabels(nil); got != nil || err != nil {
		t.Fatalf("no flags: %v %v", got, err)
	}
	for _, bad := range []string{"zone", "=a", ""} {
		_, err := ParseLabels([]string{"ok=1", bad})
		if err == nil || !strings.Contains(err.Error(), `--label "`+bad+`"`) {
			t.Errorf("ParseLabels(%q): %v, want a refusal quoting the flag", bad, err)
		}
	}
}
